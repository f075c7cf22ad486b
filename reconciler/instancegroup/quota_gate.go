package instancegroup

import (
	"context"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// QuotaCheck returns the quotas ig would break if it were built now,
// counting only the groups created before it (webhooks.QuotaProblems with
// webhooks.CreatedBefore). Errors: the groups could not be listed.
type QuotaCheck func(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]string, error)

// quotaGate holds a group not built yet (no Auto Scaling group, node group
// or Fargate profile in its status) that QuotaCheck refuses. Admission
// checks the quotas against the groups its cache holds, which lag behind
// creates of the same moment (and two replicas admit in parallel): of N
// groups created together past a quota, all may be admitted, and this
// re-check, by creation order, builds the first ones only. The others are
// held (Ready False, reason QuotaExceeded, a Warning Event) and built when
// there is room. A built group is never held: the gate refuses to build,
// it does not take anything down.
func (r *Reconciler) quotaGate(ctx context.Context, ig *v1alpha1.InstanceGroup) (ctrl.Result, bool, error) {
	if r.Quotas == nil || ig.Status.ActiveScalingGroupName != "" {
		return ctrl.Result{}, false, nil
	}
	problems, err := r.Quotas(ctx, ig)
	if err != nil {
		return ctrl.Result{}, true, fmt.Errorf("re-checking the quotas: %w", err)
	}
	if len(problems) == 0 {
		return ctrl.Result{}, false, nil
	}
	res, err := r.hold(ctx, ig, ReasonQuotaExceeded, fmt.Sprintf("Not built: %s. Groups created before this one already take the room "+
		"(admitted at the same moment, before the quota could see them); it is built when there is room, or delete it", strings.Join(problems, "; ")))
	return res, true, err
}
