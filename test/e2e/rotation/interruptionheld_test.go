package rotation

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/interruption"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A drifted group that may not rotate (a change freeze holds it outside
// its maintenance windows, holding no upgrade slot) gets a spot
// interruption warning for one of its instances: the interruption's drain
// runs to the end and the node stays cordoned, although every pass of the
// waiting group gives back the drains its own rotation started (review
// N1: before drains had owners, the group uncordoned the node within a
// second and the drain started again, in a loop). An app of 4 replicas
// under minAvailable 3 keeps 3 Ready pods throughout.
func TestSpotInterruptionWhileTheGroupWaitsIsDrainedToTheEnd(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-spot-held"
	url := interruptionQueue(t, "e2e-spot-held")
	opts := suite.ManagerOptions()
	opts.InterruptionQueue = url
	suite.ReplaceManager(t, opts)

	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["rollout"] = frozenRollout()
	suite.SetBoundaries(t, data)
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "frozen", 3, 5)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))

	// The tenant changes the instance type: every instance drifts, and the
	// freeze keeps the rotation from starting.
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	spotWhileWaiting(t, ig, ns, app, waitsToRotate(t, ig, "waiting to rotate"))
}

// As above, for a group waiting for an upgrade slot: the only slot
// (maxConcurrentUpgrades 1) is held by another tenant's group whose
// rotation a PodDisruptionBudget blocks.
func TestSpotInterruptionWhileTheGroupWaitsForASlotIsDrainedToTheEnd(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const holderNS, ns = "e2e-spot-slot-holder", "e2e-spot-slot"
	url := interruptionQueue(t, "e2e-spot-slot")
	opts := suite.ManagerOptions()
	opts.InterruptionQueue = url
	suite.ReplaceManager(t, opts)

	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["rollout"] = "maxConcurrentUpgrades: 1\n"
	suite.SetBoundaries(t, data)
	suite.Namespace(t, holderNS)
	suite.Namespace(t, ns)
	holder := harness.ShortGroup(holderNS, "holder", 1, 2)
	ig := harness.ShortGroup(ns, "waiter", 3, 5)
	suite.Create(t, holder)
	suite.Create(t, ig)
	heldReady := suite.WaitReady(t, holder, 3*time.Minute)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	// One replica that its budget never lets go: the holder's rotation
	// cannot drain its node and keeps the slot.
	suite.TeamApp(t, holderNS, 1, intstr.FromInt32(1))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))

	patch := client.MergeFrom(heldReady.DeepCopy())
	heldReady.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, heldReady, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(suite.Get(t, holder).Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "holder: %s %s", c.Reason, c.Message)
	}, 2*time.Minute, time.Second).Should(Succeed(), "the holder takes the only slot")

	patch = client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	spotWhileWaiting(t, ig, ns, app, waitsToRotate(t, ig, "waiting for an upgrade slot"))
}

// waitsToRotate checks that ig, drifted, waits to rotate: its Upgrading
// message says want, none of its instances was replaced yet and it is
// not in an Error state.
func waitsToRotate(t *testing.T, ig *v1alpha1.InstanceGroup, want string) func(Gomega) {
	return func(g Gomega) {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(want))
		g.Expect(cur.Status.NodesUpdated).To(BeZero())
		g.Expect(cur.Status.CurrentState).NotTo(ContainSubstring("Error"), "the waiting group went to %s", cur.Status.CurrentState)
	}
}

// spotWhileWaiting waits until ig, drifted, is in the state that waiting
// checks (a state in which it holds no upgrade slot and gives back its
// rotation's drains at every pass), then puts a spot interruption warning
// for an instance running app pods (none of the nodes named in spare) on
// the bus and checks that its node is drained within the notice and stays
// cordoned by the interruption while the group stays in that state, pass
// after pass, with one drain (no cordon-uncordon loop), and that app (4
// replicas, minAvailable 3) keeps 3 Ready pods throughout.
func spotWhileWaiting(t *testing.T, ig *v1alpha1.InstanceGroup, ns string, app *appsv1.Deployment, waiting func(Gomega), spare ...string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	labels := map[string]string{"app": "team-app"}
	g.Eventually(waiting, 2*time.Minute, time.Second).Should(Succeed())
	// A spot interruption warning for an instance running app pods.
	var victim *corev1.Node
	pods := &corev1.PodList{}
	g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	for _, n := range suite.GroupNodes(t, ig) {
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name && victim == nil && !slices.Contains(spare, n.Name) {
				victim = n.DeepCopy()
			}
		}
	}
	g.Expect(victim).NotTo(BeNil(), "no node runs an app pod")
	id := providers.InstanceID(victim.Spec.ProviderID)
	audit := suite.AuditPods(ns, labels)
	g.Expect(harness.PutSpotInterruptionWarning(ctx, suite.Env.AWS, id)).To(Succeed())
	started := time.Now()
	cordoned := func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Name: victim.Name}, n)).To(Succeed())
		g.Expect(n.Spec.Unschedulable).To(BeTrue(), "node %s uncordoned", n.Name)
		g.Expect(drain.OwnerOf(n)).To(Equal(drain.OwnerInterruption), "node %s annotations %v", n.Name, n.Annotations)
	}
	g.Eventually(func(g Gomega) {
		cordoned(g)
		pods := &corev1.PodList{}
		g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(Equal(victim.Name), "pod %s still on the interrupted node", p.Name)
		}
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the interrupted node drained within the 2-minute notice")
	t.Logf("spot-interrupted node %s of a group that holds no slot drained %s after the warning", victim.Name, time.Since(started).Round(time.Second))
	g.Eventually(func() int { return suite.EventCount(t, ig, interruption.EventDrained) }, 30*time.Second, time.Second).Should(Equal(1))

	// The group keeps waiting, pass after pass: the node stays cordoned and
	// the drain is not started again.
	g.Consistently(func(g Gomega) {
		cordoned(g)
		waiting(g)
	}, 20*time.Second, time.Second).Should(Succeed())
	g.Expect(suite.EventCount(t, ig, interruption.EventDrainStarted)).To(Equal(1), "one interruption drain, not a cordon-uncordon loop")
	g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
	minReady, samples, orphans := audit.End()
	t.Logf("audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(orphans).To(BeEmpty())
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
}

// frozenRollout is a boundary ConfigMap's rollout key with a change freeze
// from yesterday to tomorrow (UTC dates): no rotation starts.
func frozenRollout() string {
	now := time.Now().UTC()
	return fmt.Sprintf("maxConcurrentUpgrades: 5\nfreezes: [{from: %q, to: %q}]\n",
		now.AddDate(0, 0, -1).Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly))
}
