package reconciler

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// Event reasons of a blue/green replacement (eks-managed: a node group
// replaced after a change EKS cannot make in place).
const (
	// ReasonReplacing: a new cloud resource replaces the group's older
	// ones, deleted once it is ready; the message names them and why.
	ReasonReplacing = "Replacing"
	// ReasonReplaced: the older resources are gone.
	ReasonReplaced = "Replaced"
)

// replacementEvents records a Normal Event when a stored status starts
// naming retiring resources, or a resource replacing them changes, and
// when they are all gone. before is the status read at the start of the
// pass, ig the one just written.
func (r *InstanceGroupReconciler) replacementEvents(before, ig *v1alpha1.InstanceGroup, obs *providers.Observation) {
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
