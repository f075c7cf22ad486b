package lifecycle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

// tolerateEverything gives a pod the toleration of every taint
// (operator Exists), which many charts ship: the cordon's
// node.kubernetes.io/unschedulable taint included.
func tolerateEverything(s *corev1.PodSpec) {
	s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

// The user report of issue 24: an app of 4 replicas under a
// PodDisruptionBudget of minAvailable 3 on a 2-node group, a second group
// Ready beside it; deleting the first group took the app to 2 ready pods,
// and two of its pods were still bound to a node that had already gone.
//
// Why TestDeleteDrainsWithinThePodDisruptionBudget passed: its app does
// not tolerate the cordon. This one tolerates every taint, so the
// scheduler puts replacements back on the group's cordoned nodes (the
// emptiest); each node's drain ended once the pods it had listed were
// gone, its Drained outcome was kept, and the Auto Scaling group was
// deleted with the pods that had landed since. The second group has 4
// nodes, so the app can spread off the first group at all (with 2, the
// scheduler's spreading puts one pod back on each emptied node forever).
//
// Sampled every 100 ms from the delete until the app runs in full on the
// second group: never fewer than 3 Ready pods, and no pod ever bound to a
// Node that no longer exists.
func TestDeleteKeepsTheBudgetAndLeavesNoPodOnAGoneNode(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-delete-tolerating"
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	old := harness.ShortGroup(ns, "old", 2, 2)
	suite.Create(t, old)
	oldReady := suite.WaitReady(t, old, 3*time.Minute)
	suite.TeamApp(t, ns, 4, intstr.FromInt32(3), tolerateEverything)
	next := harness.ShortGroup(ns, "next", 4, 4)
	suite.Create(t, next)
	suite.WaitReady(t, next, 3*time.Minute)
	var nextNodes []string
	for _, n := range suite.GroupNodes(t, next) {
		nextNodes = append(nextNodes, n.Name)
	}
	labels := map[string]string{"app": "team-app"}

	audit := suite.AuditPods(ns, labels)
	g.Expect(suite.Admin.Delete(ctx, old)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{old}, 5*time.Minute)
	g.Expect(scalingGroupExists(t, oldReady.Status.ActiveScalingGroupName)).To(BeFalse(), "the old group's Auto Scaling group is deleted")
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		var on []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && harness.PodReady(&p) {
				on = append(on, p.Spec.NodeName)
			}
		}
		g.Expect(on).To(HaveLen(4))
		g.Expect(on).To(HaveEach(BeElementOf(nextNodes)))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the app runs in full on the next group")
	minReady, samples, orphans := audit.End()
	t.Logf("audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node that no longer exists: they died with its instance, undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
}
