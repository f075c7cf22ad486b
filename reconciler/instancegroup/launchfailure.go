package instancegroup

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// launchFailed sets the Degraded condition from a reconcile that
// succeeded: True (reason LaunchFailed, the cloud's message) while the
// group's launches fail (providers.Observation.LaunchFailure), else
// recovered.
func launchFailed(ig *v1alpha1.InstanceGroup, failure string) {
	if failure == "" {
		recovered(ig)
		return
	}
	setCondition(ig, v1alpha1.ConditionDegraded, true, ReasonLaunchFailed, stableMessage(failure))
}

// launchFailureEvent emits a Warning Event (LaunchFailed) when the stored
// status newly says the group's launches fail, or fail for another reason.
func (r *Reconciler) launchFailureEvent(before, ig *v1alpha1.InstanceGroup, obs *providers.Observation) {
	if obs.LaunchFailure == "" {
		return
	}
	if c := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionDegraded); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == ReasonLaunchFailed && c.Message == stableMessage(obs.LaunchFailure) {
		return
	}
	r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonLaunchFailed, "Reconcile",
		"Auto Scaling group %s cannot launch instances (%d instance(s), desired capacity %d): %s", obs.GroupName, len(obs.Instances), obs.Desired, obs.LaunchFailure)
}
