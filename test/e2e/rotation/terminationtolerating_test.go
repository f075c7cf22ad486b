package rotation

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/termination"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Issue 36: Auto Scaling's own scale-in never takes an app that tolerates
// every taint ({operator: Exists}, the cordon included) below its
// PodDisruptionBudget while its pods can be evicted. The app, 4 replicas
// under minAvailable 3, starts on its group's first node; the group then
// grows to 3 nodes and its desired capacity is lowered to 2 through the
// Auto Scaling API (as the cluster-autoscaler or a person would). Auto
// Scaling's default termination policy picks the first node (the oldest
// in the zone with the most instances), holding all 4 pods, and the drain
// hook holds it in Terminating:Wait. Sampled every 100 ms: never fewer
// than 3 Ready pods (all 4 leave that node one budgeted eviction at a
// time); the instance drained before it went (one hook completion
// "drained"); the app's pods evicted a bounded number of times: each pod
// on the node once, plus at most drain.MaxArrivalEvictions evictions of
// pods that the scheduler put back on the cordoned node (the emptiest
// once its last pod leaves), which they tolerate.
func TestScaleInKeepsTheBudgetOfAnAppToleratingEveryTaint(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns, replicas, minAvailable = "e2e-scalein-tolerating", 4, 3
	pollManager(t, 5*time.Second)
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "hooked", 1, 5)
	suite.Create(t, ig)
	name := suite.WaitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	first := suite.GroupNodes(t, ig)
	g.Expect(first).To(HaveLen(1))
	app := suite.TeamApp(t, ns, replicas, intstr.FromInt32(minAvailable), func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
	labels := map[string]string{"app": "team-app"}
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	_, err := asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	g.Expect(suite.PodNodes(t, ns)).To(HaveEach(first[0].Name), "the app runs on the group's first node")
	victim := first[0].Spec.ProviderID[strings.LastIndex(first[0].Spec.ProviderID, "/")+1:]
	uids := suite.WatchPodUIDs(ns, labels)
	drainedBefore := harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"})
	audit := suite.AuditPods(ns, labels)
	started := time.Now()

	_, err = asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(2)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(HaveLen(1))
		var ids []string
		for _, in := range out.AutoScalingGroups[0].Instances {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
		g.Expect(ids).To(HaveLen(2))
		g.Expect(ids).NotTo(ContainElement(victim), "Auto Scaling's default policy terminates the oldest instance of the fullest zone")
		nodes := &corev1.NodeList{}
		g.Expect(suite.Admin.List(ctx, nodes)).To(Succeed())
		for _, n := range nodes.Items {
			g.Expect(n.Name).NotTo(Equal(first[0].Name), "the Node of instance %s, gone", victim)
		}
	}, 4*time.Minute, time.Second).Should(Succeed(), "Auto Scaling's scale-in ends")
	took := time.Since(started)
	g.Eventually(func() int32 { return suite.AvailableReplicas(app) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(int32(replicas)))
	minReady, samples, orphans := audit.End()
	evicted := uids.End() - replicas
	// Each pod on the node leaves once; pods that come back to it have at
	// most MaxArrivalEvictions evictions (their workload's, for this
	// node's drain); past that they are left to go with the node, and
	// replaced once more each (at most the replicas).
	bound := replicas + drain.MaxArrivalEvictions + replicas
	t.Logf("scale-in of %s (node %s, all %d pods of the app) done in %s; audit: %d samples, at least %d Ready pods (budget %d), left with the node %v; "+
		"%d pod(s) of the app evicted or lost (bound %d: %d on the node + %d returns + at most %d left); hook completions drained +%.0f",
		victim, first[0].Name, replicas, took.Round(100*time.Millisecond), samples, minReady, minAvailable, orphans, evicted, bound, replicas, drain.MaxArrivalEvictions, replicas,
		harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"})-drainedBefore)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(minReady).To(BeNumerically(">=", minAvailable), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
	g.Expect(evicted).To(BeNumerically(">=", replicas), "every pod left the node")
	g.Expect(evicted).To(BeNumerically("<=", bound), "the app's pods were evicted more often than the bound")
	g.Expect(harness.Counter(t, "instance_manager_termination_hook_completions_total", map[string]string{"reason": "drained"})-drainedBefore).To(Equal(1.0),
		"the instance Auto Scaling chose was drained before it went")
	g.Eventually(func() int { return suite.EventCount(t, ig, termination.EventDrained) }, 30*time.Second, time.Second).Should(Equal(1))
}
