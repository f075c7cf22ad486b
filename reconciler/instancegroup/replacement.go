package instancegroup

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// replacementEvents records a Normal Event when a stored status starts
// naming retiring resources, or a resource replacing them changes, and
// when they are all gone. before is the status read at the start of the
// pass, ig the one just written.
func (r *Reconciler) replacementEvents(before, ig *v1alpha1.InstanceGroup, obs *providers.Observation) {
	was, now := before.Status, ig.Status
	switch {
	case len(now.RetiringScalingGroupNames) > 0 &&
		(now.ActiveScalingGroupName != was.ActiveScalingGroupName || !slices.Equal(now.RetiringScalingGroupNames, was.RetiringScalingGroupNames)):
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonReplacing, "Replace", "Replacing %s with %s: %s",
			strings.Join(now.RetiringScalingGroupNames, ", "), now.ActiveScalingGroupName, obs.Message)
	case len(now.RetiringScalingGroupNames) == 0 && len(was.RetiringScalingGroupNames) > 0:
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonReplaced, "Replace", "%s replaced %s, which are deleted",
			now.ActiveScalingGroupName, strings.Join(was.RetiringScalingGroupNames, ", "))
	}
}
