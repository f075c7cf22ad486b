package webhooks

import (
	"context"
	"fmt"
	"strings"

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
	igs := &v1alpha1.InstanceGroupList{}
	if err := c.List(ctx, igs); err != nil {
		return nil, err
	}
	var named []string
	total := 0
	for i := range igs.Items {
		ig := &igs.Items[i]
		if s := ig.Spec.Strategy; ig.DeletionTimestamp != nil || s.Type != v1alpha1.StrategyCRD || s.CRD == nil || s.CRD.Spec == "" {
			continue
		}
		_, refused := crdtemplate.Admit(ig, next)
		if refused == nil {
			continue
		}
		if _, err := crdtemplate.Admit(ig, current); err != nil {
			continue // already refused: not this change's doing
		}
		total++
		if len(named) < maxReportedGroups {
			named = append(named, fmt.Sprintf("%s/%s: %v", ig.Namespace, ig.Name, refused))
		}
	}
	if total == 0 {
		return nil, nil
	}
	msg := fmt.Sprintf("this change refuses the crd strategy template (spec.strategy.crd.spec) of %d InstanceGroup(s); each one's next upgrade fails "+
		"with the reason until its template is changed: %s", total, strings.Join(named, "; "))
	if total > len(named) {
		msg += fmt.Sprintf("; and %d more", total-len(named))
	}
	return []string{msg}, nil
}
