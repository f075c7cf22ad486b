package webhooks

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/reconciler/upgrade/crdtemplate"
)

// crdRefusals returns the admission warning, if any, for the groups whose
// crd strategy template next refuses while current admits it (a kind no
// longer allowed, a field no longer the tenant's): up to 10 groups named
// with the reason, and how many more. The change is not refused (the admin
// can always tighten, security review N13); each such group's next upgrade
// fails with the same reason (crdtemplate.Prepare) until its template is
// changed. Errors come from listing InstanceGroups.
func crdRefusals(ctx context.Context, c client.Reader, current, next *boundaries.Config) ([]string, error) {
	if current == nil {
		return nil, nil
	}
	named, total, err := reportGroups(ctx, c, func(ig *v1alpha1.InstanceGroup) string {
		if s := ig.Spec.Strategy; s.Type != v1alpha1.StrategyCRD || s.CRD == nil || s.CRD.Spec == "" {
			return ""
		}
		_, refused := crdtemplate.Admit(ig, next)
		if refused == nil {
			return ""
		}
		if _, err := crdtemplate.Admit(ig, current); err != nil {
			return "" // already refused: not this change's doing
		}
		return ": " + refused.Error()
	})
	if err != nil || total == 0 {
		return nil, err
	}
	return []string{fmt.Sprintf("this change refuses the crd strategy template (spec.strategy.crd.spec) of %d InstanceGroup(s); each one's next upgrade fails "+
		"with the reason until its template is changed: %s", total, andMore(named, total))}, nil
}
