package instancegroup

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// DefaultFargateMaxUnavailable is how many of a retiring Fargate
// profile's pods are evicted at once when the group's
// spec.strategy.rollingUpdate.maxUnavailable is not set: 25% of the pods
// left on it (at least 1). The node default (1) suits nodes that hold
// many pods each; every Fargate pod is a node of its own, so one at a
// time would empty a profile of a few hundred pods in hours, holding an
// upgrade slot all along. PodDisruptionBudgets still bound each
// workload's evictions.
var DefaultFargateMaxUnavailable = intstr.FromString("25%")

// fargatePace is how many of the pods left on a retiring Fargate
// profile, pods of them, may be evicted and not yet gone at once: the
// group's maxUnavailable when its spec sets one (upgrade.MaxUnavailable),
// else DefaultFargateMaxUnavailable of pods, rounded down, at least 1.
func fargatePace(ig *v1alpha1.InstanceGroup, pods int) int {
	if ru := ig.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		return upgrade.MaxUnavailable(ig, pods)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&DefaultFargateMaxUnavailable, pods, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}
