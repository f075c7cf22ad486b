package rotation

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/harness"
)

// The other three states of review N1 in which a drifted group holds no
// upgrade slot and gives back its rotation's drains at every pass
// (stalled, stopped, held; interruptionheld_test.go has the other two):
// a spot interruption's drain is never one of them.

// A drifted group whose rotation stalled: a pod that its budget never
// lets go blocks the rotation's first drain for the stall timeout, so the
// group gives its slot back, uncordons that node and waits one stall
// timeout (reason UpgradeStalled) before it asks again, releasing its
// rotation's drains at every pass meanwhile. A spot interruption warning
// for another of its instances arrives during that wait: the drain runs to
// the end and the node stays cordoned by the interruption (review N1: the
// stalled group's passes uncordoned it, two minutes before EC2 reclaims
// the instance).
func TestSpotInterruptionWhileTheRotationIsStalledIsDrainedToTheEnd(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-spot-stalled"
	opts := suite.ManagerOptions()
	opts.InterruptionQueue = interruptionQueue(t, ns)
	// The stalled wait (one stall timeout) outlasts the spot check (the
	// drain, then 20 s of passes). The drain timeout outlasts the stall:
	// a drain given up as blocked would move the rotation on to the next
	// node, whose drain is progress.
	opts.UpgradeStallTimeout = 35 * time.Second
	opts.DrainTimeout = 2 * time.Minute
	suite.ReplaceManager(t, opts)

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "stalled", 3, 5)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))
	// The rotation drains its drifted instances in instance id order: a
	// pod on the first one's node that its budget never lets go.
	nodes := suite.GroupNodes(t, ig)
	first := slices.MinFunc(nodes, func(a, b corev1.Node) int {
		return cmp.Compare(providers.InstanceID(a.Spec.ProviderID), providers.InstanceID(b.Spec.ProviderID))
	})
	pinnedBlocker(t, ns, first.Name)

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	g.Eventually(func(g Gomega) drain.Owner {
		n := &corev1.Node{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Name: first.Name}, n)).To(Succeed())
		return drain.OwnerOf(n)
	}, 2*time.Minute, 200*time.Millisecond).Should(Equal(drain.OwnerRotation), "the rotation drains node %s first", first.Name)
	stalled := func(g Gomega) {
		waitsToRotate(t, ig, "no rotation progress for")(g)
		c := meta.FindStatusCondition(suite.Get(t, ig).Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c.Reason).To(Equal(instancegroup.ReasonUpgradeStalled))
	}
	spotWhileWaiting(t, ig, ns, app, stalled, first.Name)
}

// A drifted group whose rotation stopped: the three surge instances of
// its first batch (maxSurge 3, launched before any drain) run an image
// whose kubelet never starts, so at their startup timeout the rotation
// stops (reason RotationStopped) with every old node still running, and
// at every pass the stopped group gives back its rotation's drains until
// a new launch template version. A spot interruption warning for an old
// instance arrives meanwhile: the drain runs to the end and the node
// stays cordoned by the interruption (review N1).
func TestSpotInterruptionWhileTheRotationIsStoppedIsDrainedToTheEnd(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	const ns = "e2e-spot-stopped"
	opts := suite.ManagerOptions()
	opts.InterruptionQueue = interruptionQueue(t, ns)
	suite.ReplaceManager(t, opts)

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "stopped", 3, 6)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(upgrade.MaxNeverJoined))}}
	ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: 10 * time.Second}}
	suite.Create(t, ig)
	suite.WaitReady(t, ig, 3*time.Minute)
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))

	// The admin's new default image never joins: every instance drifts.
	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[2], 5))
	stopped := func(g Gomega) {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(upgrade.ReasonRotationStopped), c.Message)
		g.Expect(cur.Spec.EKS.Configuration.Image).To(Equal(suite.Cloud.AMIs[2]))
	}
	spotWhileWaiting(t, ig, ns, app, stopped)
}

// A drifted group the admission gate holds: its instance type changed
// during a change freeze (so nothing rotated yet), then the admin changed
// the default image and capped the namespace's maxSize below the group's,
// so the fan-out's re-admission is refused and the group keeps the spec
// admitted under the earlier boundaries (Ready False, reason
// BoundariesStale). At every pass the held group gives back its slot and
// its rotation's drains (unwindHeld). A spot interruption warning for one
// of its instances arrives meanwhile: the drain runs to the end and the
// node stays cordoned by the interruption (review N1).
func TestSpotInterruptionWhileTheGroupIsHeldIsDrainedToTheEnd(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-spot-gate"
	opts := suite.ManagerOptions()
	opts.InterruptionQueue = interruptionQueue(t, ns)
	suite.ReplaceManager(t, opts)

	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["rollout"] = frozenRollout()
	suite.SetBoundaries(t, data)
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "held", 3, 5)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	g.Eventually(waitsToRotate(t, ig, "waiting to rotate"), 2*time.Minute, time.Second).Should(Succeed())
	changed := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	changed["rollout"] = data["rollout"]
	changed["quotas"] = "perNamespace: {maxGroups: 100}\nnamespaces:\n  " + ns + ": {maxSize: 4}\n"
	suite.SetBoundaries(t, changed)
	held := func(g Gomega) {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(instancegroup.ReasonBoundariesStale), c.Message)
		g.Expect(c.Message).To(ContainSubstring("re-admission was refused"))
		g.Expect(cur.Spec.EKS.Configuration.InstanceType).To(Equal("m5.large"))
		g.Expect(cur.Spec.EKS.Configuration.Image).To(Equal(suite.Cloud.AMIs[0]))
	}
	spotWhileWaiting(t, ig, ns, app, held)
}

// pinnedBlocker runs one pod on node under a PodDisruptionBudget that
// allows no disruption, so no drain of node ends; both go, the budget
// first, before the test's earlier cleanups (the group's deletion drains
// node).
func pinnedBlocker(t *testing.T, ns, node string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	labels := map[string]string{"app": "blocker"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocker"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
						}}},
					}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
				},
			},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocker"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	g.Expect(suite.Admin.Create(ctx, d)).To(Succeed())
	g.Expect(suite.Admin.Create(ctx, pdb)).To(Succeed())
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(suite.Admin.Delete(ctx, pdb))
		_ = client.IgnoreNotFound(suite.Admin.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	g.Eventually(func() int32 { return suite.AvailableReplicas(d) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(1)))
}
