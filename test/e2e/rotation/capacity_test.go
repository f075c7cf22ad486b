package rotation

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A rotation whose replacements get no capacity (issue 26: "says so in the
// group's conditions within one listing period"): EC2 has no c5.large
// capacity, the way AWS shows it (the Auto Scaling group's launches fail as
// scaling activities; no call fails). Within one listing period
// (--cloud-poll-period, 2 minutes by default) the group's Degraded
// condition says LaunchFailed with AWS's message; the rotation waits with
// no more than maxUnavailable nodes out; once capacity is back it finishes
// on the new type.
func TestRotationWithoutCapacitySaysSoAndWaits(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns, scarceType = "e2e-capacity", "c5.large"
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "scarce", 2, 3)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)

	g.Expect(suite.Env.SetInsufficientCapacity(ctx, scarceType)).To(Succeed())
	t.Cleanup(func() { _ = suite.Env.SetInsufficientCapacity(context.Background()) })
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = scarceType
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	changed := time.Now()

	var degraded *metav1.Condition
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		degraded = meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDegraded)
		if degraded == nil || degraded.Status != metav1.ConditionTrue {
			return fmt.Sprintf("state %s, Degraded %v", cur.Status.CurrentState, degraded)
		}
		return degraded.Reason
	}, 2*time.Minute, time.Second).Should(Equal(instancegroup.ReasonLaunchFailed), "the group says why its rotation waits")
	g.Expect(degraded.Message).To(ContainSubstring("InsufficientInstanceCapacity"))
	g.Expect(degraded.Message).To(ContainSubstring(scarceType))
	t.Logf("LaunchFailed %s after the change: %s", time.Since(changed).Round(time.Second), degraded.Message)
	_, err := harness.WaitForEvent(ctx, suite.Admin, ns, ig.Name, instancegroup.ReasonLaunchFailed, "InsufficientInstanceCapacity", 30*time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "a LaunchFailed Warning Event")

	// It waits: maxUnavailable 1 of 2, so one node stays available.
	g.Consistently(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 10*time.Second, time.Second).
		Should(BeNumerically(">=", 1), "the rotation without capacity takes no more nodes out")

	// Capacity is back: the rotation finishes on the new type, Degraded
	// cleared.
	g.Expect(suite.Env.SetInsufficientCapacity(ctx)).To(Succeed())
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		if c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			return "Degraded: " + c.Message
		}
		if cur.Status.CurrentState != v1alpha1.StateReady || cur.Status.ObservedGeneration != cur.Generation {
			return "state " + cur.Status.CurrentState
		}
		nodes := suite.GroupNodes(t, ig)
		for _, n := range nodes {
			if n.Labels[corev1.LabelInstanceTypeStable] != scarceType || n.Spec.Unschedulable {
				return fmt.Sprintf("node %s: %s, unschedulable %t", n.Name, n.Labels[corev1.LabelInstanceTypeStable], n.Spec.Unschedulable)
			}
		}
		if len(nodes) != 2 {
			return fmt.Sprintf("%d nodes", len(nodes))
		}
		return "rotated"
	}, 5*time.Minute, time.Second).Should(Equal("rotated"))
}
