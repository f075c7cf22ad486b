package rotation

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/reconciler/termination"
	"github.com/instancemgr/instance-manager/test/harness"
)

// pollManager runs the suite's manager with the Auto Scaling listing
// polled every poll (a person's termination is seen within it), and puts
// the suite's manager back when the test ends.
func pollManager(t *testing.T, poll time.Duration) {
	t.Helper()
	opts := suite.ManagerOptions()
	opts.CloudPollPeriod = poll
	suite.ReplaceManager(t, opts)
}

// Auto Scaling terminates on its own, and every such termination passes
// the drain hook (emulator behaviour "hooks", on by default): a group of 3
// nodes runs an app of 4 replicas under a PodDisruptionBudget of
// minAvailable 3. (a) A person terminates two instances through the Auto
// Scaling API (TerminateInstanceInAutoScalingGroup, no decrement); (b) a
// person lowers the desired capacity by hand. In each, sampled every
// 100 ms: never fewer than 3 Ready pods, and no pod bound to a Node whose
// instance is gone; the instances wait in Terminating:Wait until their
// nodes are drained.
func TestOutOfBandTerminationsAreDrained(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-termination"
	pollManager(t, 10*time.Second)
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "hooked", 2, 5)
	suite.Create(t, ig)
	name := suite.WaitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	describe := func(g Gomega) astypes.AutoScalingGroup {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out.AutoScalingGroups[0]
	}
	hooks, err := asg.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(name)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hooks.LifecycleHooks).To(ContainElement(And(
		HaveField("LifecycleHookName", HaveValue(Equal("instance-manager-drain"))),
		HaveField("LifecycleTransition", HaveValue(Equal("autoscaling:EC2_INSTANCE_TERMINATING"))),
		HaveField("DefaultResult", HaveValue(Equal("CONTINUE"))))), "the group carries the drain hook")

	// 3 nodes: the desired capacity raised by hand (the spec's min is 2).
	_, err = asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))
	labels := map[string]string{"app": "team-app"}
	inService := func(g Gomega) []string {
		var ids []string
		for _, in := range describe(g).Instances {
			if in.LifecycleState == astypes.LifecycleStateInService {
				ids = append(ids, aws.ToString(in.InstanceId))
			}
		}
		return ids
	}
	// settled: the group holds want instances, all InService, each a Ready
	// node, and the app runs in full.
	settled := func(want int, before []string) {
		t.Helper()
		// The instances that left: their Nodes go too (the environment
		// removes the Node of a terminated instance, as the cloud
		// controller does), after which a pod still bound to one is an
		// orphan the audit sees.
		g.Eventually(func(g Gomega) {
			now := inService(g)
			g.Expect(now).To(HaveLen(want))
			nodes := &corev1.NodeList{}
			g.Expect(suite.Admin.List(ctx, nodes)).To(Succeed())
			for _, id := range before {
				if slices.Contains(now, id) {
					continue
				}
				for _, n := range nodes.Items {
					g.Expect(n.Spec.ProviderID).NotTo(HaveSuffix("/"+id), "the Node of instance %s, gone", id)
				}
			}
		}, 4*time.Minute, time.Second).Should(Succeed())
		g.Eventually(func(g Gomega) {
			grp := describe(g)
			g.Expect(grp.Instances).To(HaveLen(want))
			g.Expect(inService(g)).To(HaveLen(want))
			g.Expect(harness.Available(suite.GroupNodes(t, ig))).To(Equal(want))
		}, 4*time.Minute, time.Second).Should(Succeed())
		g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
		// Every pod Ready on one of the group's Nodes, none left on a gone
		// one (the pod garbage collector removes those in its own time:
		// the audit keeps sampling meanwhile).
		g.Eventually(func(g Gomega) {
			live := map[string]bool{}
			for _, n := range suite.GroupNodes(t, ig) {
				live[n.Name] = true
			}
			pods := &corev1.PodList{}
			g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(live).To(HaveKey(p.Spec.NodeName), "pod %s", p.Name)
				g.Expect(harness.PodReady(&p)).To(BeTrue(), "pod %s", p.Name)
			}
		}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	}

	// (a) Two instances terminated by a person, without decrement.
	before := inService(g)
	victims := before[:2]
	drainedBefore := harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"})
	audit := suite.AuditPods(ns, labels)
	started := time.Now()
	for _, id := range victims {
		_, err := asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(false)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		for _, in := range describe(g).Instances {
			g.Expect(victims).NotTo(ContainElement(aws.ToString(in.InstanceId)))
		}
	}, 4*time.Minute, time.Second).Should(Succeed(), "the terminated instances leave once drained")
	t.Logf("(a) two instances drained and gone %s after their termination", time.Since(started).Round(time.Second))
	settled(3, before)
	minReady, samples, orphans := audit.End()
	t.Logf("(a) audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node whose instance is gone: undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
	// Events are written in the background; a second one of the same
	// reason is written as a series of 2.
	g.Eventually(func() int { return suite.EventCount(t, ig, termination.EventDrainStarted) }, 30*time.Second, time.Second).
		Should(Equal(2), "one TerminationDrainStarted Event per instance")
	g.Eventually(func() int { return suite.EventCount(t, ig, termination.EventDrained) }, 30*time.Second, time.Second).Should(Equal(2))
	g.Expect(harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"}) - drainedBefore).To(Equal(2.0))

	// (b) The desired capacity lowered by hand: Auto Scaling picks one.
	before = inService(g)
	audit = suite.AuditPods(ns, labels)
	started = time.Now()
	_, err = asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(2)})
	g.Expect(err).NotTo(HaveOccurred())
	settled(2, before)
	t.Logf("(b) scale in drained and done %s after the desired capacity was lowered", time.Since(started).Round(time.Second))
	minReady, samples, orphans = audit.End()
	t.Logf("(b) audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node whose instance is gone: undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
	g.Expect(harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"})-drainedBefore).To(Equal(3.0), "the scale in's instance was drained too")
}

// The admin removes a subnet from every group (a boundary default). Auto
// Scaling would move the instances of the removed subnet's zone itself (AZ
// rebalancing, emulator behaviour "rebalance": launch one, terminate one
// outside, through the drain hook), outside the rotation's slots and
// windows; instead the instances in the removed subnet are drift ("subnet
// ... is no longer listed", said by an InstancesDrifted Event),
// AZRebalance is suspended before the new subnets are written, and the
// controller's rotation drains and replaces them. A group of 3 nodes over
// two subnets runs an app of 4 replicas under a PodDisruptionBudget of
// minAvailable 3; sampled every 100 ms: never fewer than 3 Ready pods, no
// pod bound to a Node whose instance is gone, every instance of the
// removed subnet drained by the rotation before it goes, and no AZ
// rebalancing activity.
func TestRemovedSubnetIsEmptiedByTheRotation(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-subnet-removed"
	pollManager(t, 10*time.Second)
	before := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	suite.SetBoundaries(t, before)
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "spread", 3, 5)
	suite.Create(t, ig)
	name := suite.WaitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	subnets, err := ec2.NewFromConfig(suite.Env.AWS).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: suite.Cloud.Subnets})
	g.Expect(err).NotTo(HaveOccurred())
	zoneOf := map[string]string{}
	for _, s := range subnets.Subnets {
		zoneOf[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
	}
	removed, kept := zoneOf[suite.Cloud.Subnets[0]], zoneOf[suite.Cloud.Subnets[1]]
	g.Expect(removed).NotTo(Equal(kept), "the fixture's two subnets are in two zones")
	instances := func(g Gomega) []astypes.Instance {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out.AutoScalingGroups[0].Instances
	}
	var leaving []string
	for _, in := range instances(g) {
		if aws.ToString(in.AvailabilityZone) == removed {
			leaving = append(leaving, aws.ToString(in.InstanceId))
		}
	}
	g.Expect(leaving).NotTo(BeEmpty(), "Auto Scaling spread the group over both zones")
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))
	labels := map[string]string{"app": "team-app"}
	g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
	rotatedBefore := harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "already_drained"})
	audit := suite.AuditPods(ns, labels)
	started := time.Now()

	suite.SetBoundaries(t, suite.Cloud.WithoutFirstSubnet(t, before))

	g.Eventually(func(g Gomega) {
		ins := instances(g)
		g.Expect(ins).To(HaveLen(3))
		for _, in := range ins {
			g.Expect(in.LifecycleState).To(Equal(astypes.LifecycleStateInService))
			g.Expect(aws.ToString(in.AvailabilityZone)).To(Equal(kept), "instance %s", aws.ToString(in.InstanceId))
		}
		g.Expect(harness.Available(suite.GroupNodes(t, ig))).To(Equal(3))
	}, 6*time.Minute, time.Second).Should(Succeed(), "every instance moved out of the removed subnet")
	t.Logf("%d instance(s) moved out of %s in %s", len(leaving), removed, time.Since(started).Round(time.Second))
	g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
	minReady, samples, orphans := audit.End()
	t.Logf("audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node whose instance is gone: undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")

	// The rotation did it: its drains came before each termination, and
	// Auto Scaling rebalanced nothing.
	g.Expect(harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "already_drained"})-rotatedBefore).To(BeNumerically(">=", len(leaving)),
		"each instance of the removed subnet was drained by the rotation before Auto Scaling was asked to terminate it")
	acts, err := asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String(name)})
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range acts.Activities {
		g.Expect(aws.ToString(a.Cause)).NotTo(ContainSubstring("Availability Zone rebalancing"), "AZRebalance was suspended before the subnets changed")
	}
	g.Eventually(func() []string { return suite.EventNotes(t, ig, "InstancesDrifted") }, 30*time.Second, time.Second).
		Should(ContainElement(ContainSubstring("subnet " + suite.Cloud.Subnets[0] + " is no longer listed")))
	g.Eventually(func() int { return suite.EventCount(t, ig, "NodeDrained") }, 30*time.Second, time.Second).Should(BeNumerically(">=", len(leaving)))
}
