package webhooks

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/crdtemplate"
)

// crdRefusals returns the admission warning, if any, for the groups whose
// crd strategy template next refuses while current admits it
// (crdtemplate.NewlyRefused): up to 10 groups named with the reason, and
// how many more. The change is not refused (the admin can always tighten,
// security review N13); each such group's next upgrade fails with the
// same reason (crdtemplate.Prepare) until its template is changed. Errors
// come from listing InstanceGroups.
func crdRefusals(ctx context.Context, c client.Reader, current, next *boundaries.Config) ([]string, error) {
	if current == nil {
		return nil, nil
	}
	named, total, err := reportGroups(ctx, c, func(ig *v1alpha1.InstanceGroup) string {
		if refused := crdtemplate.NewlyRefused(ig, current, next); refused != nil {
			return ": " + refused.Error()
		}
		return ""
	})
	if err != nil || total == 0 {
		return nil, err
	}
	return []string{fmt.Sprintf("this change refuses the crd strategy template (spec.strategy.crd.spec) of %d InstanceGroup(s); each one's next upgrade fails "+
		"with the reason until its template is changed: %s", total, andMore(named, total))}, nil
}
