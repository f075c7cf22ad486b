package rotation

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/interruption"
	"github.com/instancemgr/instance-manager/reconciler/termination"
	"github.com/instancemgr/instance-manager/test/harness"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// interruptionQueue creates the queue and the EventBridge rules of
// docs/autoscaling.md's setup in the emulator and returns the queue's URL.
func interruptionQueue(t *testing.T, name string) string {
	t.Helper()
	return harness.InterruptionQueue(t, suite.Env.AWS, name)
}

// With the interruption queue, an outside termination's drain starts on
// Auto Scaling's EventBridge event, not at the next listing: the manager
// lists every 10 minutes, and a person's TerminateInstanceInAutoScalingGroup
// is drained and gone within 90 s. Then a spot interruption warning put on
// the bus for one of the group's instances cordons and drains its Node. An
// app of 4 replicas under a PodDisruptionBudget of minAvailable 3 keeps at
// least 3 Ready pods throughout, and no pod is left on a gone Node.
func TestInterruptionQueueDrainsInSeconds(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-interruption"
	url := interruptionQueue(t, "e2e-interruptions")
	opts := suite.ManagerOptions()
	opts.CloudPollPeriod = 10 * time.Minute
	opts.InterruptionQueue = url
	suite.ReplaceManager(t, opts)

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "queued", 3, 5)
	suite.Create(t, ig)
	name := suite.WaitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	app := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))
	labels := map[string]string{"app": "team-app"}
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	instances := func(g Gomega) []astypes.Instance {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out.AutoScalingGroups[0].Instances
	}
	nodeOf := func(id string) *corev1.Node {
		for _, n := range suite.GroupNodes(t, ig) {
			if providers.InstanceID(n.Spec.ProviderID) == id {
				return &n
			}
		}
		return nil
	}
	// Every app pod Ready on one of the group's live Nodes.
	appSettled := func() {
		t.Helper()
		g.Eventually(func(g Gomega) {
			live := map[string]bool{}
			for _, n := range suite.GroupNodes(t, ig) {
				live[n.Name] = !n.Spec.Unschedulable
			}
			pods := &corev1.PodList{}
			g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(live).To(HaveKey(p.Spec.NodeName), "pod %s", p.Name)
				g.Expect(harness.PodReady(&p)).To(BeTrue(), "pod %s", p.Name)
			}
		}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
		g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
	}
	appSettled()

	// (a) A person terminates an instance: drained and gone in seconds.
	// withPods returns an InService instance whose Node runs app pods.
	withPods := func() (string, *corev1.Node) {
		t.Helper()
		pods := &corev1.PodList{}
		g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		for _, in := range instances(g) {
			id := aws.ToString(in.InstanceId)
			n := nodeOf(id)
			if n == nil || in.LifecycleState != astypes.LifecycleStateInService || n.Spec.Unschedulable {
				continue
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == n.Name {
					return id, n
				}
			}
		}
		t.Fatalf("no instance of the group runs an app pod")
		return "", nil
	}
	victim, _ := withPods()
	handedOver := harness.Counter(t, "instance_manager_interruption_messages_total", map[string]string{"kind": "lifecycle_terminate", "outcome": "handed_over"})
	audit := suite.AuditPods(ns, labels)
	started := time.Now()
	_, err := asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(victim), ShouldDecrementDesiredCapacity: aws.Bool(false)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for _, in := range instances(g) {
			g.Expect(aws.ToString(in.InstanceId)).NotTo(Equal(victim))
		}
	}, 90*time.Second, 500*time.Millisecond).Should(Succeed(), "drained and gone far within the 10-minute listing period")
	t.Logf("(a) terminated instance drained and gone %s after TerminateInstanceInAutoScalingGroup (listing period 10m)", time.Since(started).Round(time.Second))
	g.Eventually(func() int { return suite.EventCount(t, ig, termination.EventDrained) }, 30*time.Second, time.Second).Should(Equal(1))
	g.Expect(harness.Counter(t, "instance_manager_interruption_messages_total", map[string]string{"kind": "lifecycle_terminate", "outcome": "handed_over"})-handedOver).To(BeNumerically(">=", 1), "the queue's event, not the listing, started the drain")
	appSettled()
	minReady, samples, orphans := audit.End()
	t.Logf("(a) audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node whose instance is gone: undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")

	// (b) A spot interruption warning for an instance of the group, put on
	// the bus as EC2 sends it: its Node is cordoned and drained.
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	spot, spotNode := withPods()
	audit = suite.AuditPods(ns, labels)
	g.Expect(harness.PutSpotInterruptionWarning(ctx, suite.Env.AWS, spot)).To(Succeed())
	started = time.Now()
	g.Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Name: spotNode.Name}, n)).To(Succeed())
		g.Expect(n.Spec.Unschedulable).To(BeTrue())
		g.Expect(n.Annotations).To(HaveKey(drain.AnnotationDrainStarted))
		pods := &corev1.PodList{}
		g.Expect(suite.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(Equal(spotNode.Name), "pod %s still on the interrupted node", p.Name)
		}
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the interrupted node cordoned and drained within the 2-minute notice")
	t.Logf("(b) spot-interrupted node %s drained %s after the warning", spotNode.Name, time.Since(started).Round(time.Second))
	g.Eventually(func() int { return suite.EventCount(t, ig, interruption.EventDrained) }, 30*time.Second, time.Second).Should(Equal(1))
	g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(4)))
	minReady, samples, orphans = audit.End()
	t.Logf("(b) audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(orphans).To(BeEmpty())
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
}
