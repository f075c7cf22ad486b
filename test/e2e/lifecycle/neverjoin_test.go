package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A launch template version whose instances never join (issue 24 item 4,
// issue 36 item 2): the first replacement is removed before it joins with
// a capacity decrement, as the cluster-autoscaler's cleanup of
// unregistered nodes does; Auto Scaling launches nothing for it, so the
// batch forgoes it (a ReplacementForgone Warning naming it; before, the
// batch waited for it for good) and it counts as never joined; the next
// batch's replacement and node health's replacement of it time out; at
// the third the rotation stops (Upgrading RotationStopped, a Warning Event
// naming version 2), the old node left stays schedulable, the group
// launches from version 1 again, and an app of 3 replicas under a budget
// of minAvailable 2 never has fewer than 2 available.
func TestReplacementsThatNeverJoinStopTheRotation(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-neverjoin"
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "workers", 2, 4)
	ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: 20 * time.Second}}
	suite.Create(t, ig)
	name := suite.WaitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	// Three nodes above minSize 2, so a decrement is allowed.
	_, err := asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))
	old := map[string]bool{}
	_, group := suite.ASGTags(t, name)
	for _, in := range group.Instances {
		old[aws.ToString(in.InstanceId)] = true
	}
	g.Expect(old).To(HaveLen(3))
	d := suite.TeamApp(t, ns, 3, intstr.FromInt32(2))

	// Every instance launched from now on never becomes a Node.
	suite.Env.Bridge.SetNeverJoin(func(group, id string) bool { return strings.Contains(group, ns) && !old[id] })
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoin(nil) })

	stop, done := make(chan struct{}), make(chan struct{})
	minPods, samples := int32(1<<30), 0
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if n := suite.AvailableReplicas(d); n >= 0 {
				minPods, samples = min(minPods, n), samples+1
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	})

	cur := suite.Get(t, ig)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, cur, patch)).To(Succeed())

	// inGroup returns the ids of the group's instances not terminating,
	// old and new.
	inGroup := func() (olds, news []string) {
		_, group := suite.ASGTags(t, name)
		for _, in := range group.Instances {
			id := aws.ToString(in.InstanceId)
			switch {
			case strings.HasPrefix(string(in.LifecycleState), "Terminating"):
			case old[id]:
				olds = append(olds, id)
			default:
				news = append(news, id)
			}
		}
		return olds, news
	}
	// cordoned names the nodes of the old instances still in service
	// that are cordoned (the first batch's node goes with its instance).
	cordoned := func() []string {
		olds, _ := inGroup()
		var out []string
		for _, n := range suite.GroupNodes(t, ig) {
			for _, id := range olds {
				if strings.HasSuffix(n.Spec.ProviderID, "/"+id) && n.Spec.Unschedulable {
					out = append(out, n.Name)
				}
			}
		}
		return out
	}

	// 1. The first replacement is removed with a decrement before it
	// joins (the cluster-autoscaler's cleanup of unregistered nodes).
	var first string
	g.Eventually(func() int {
		_, news := inGroup()
		if len(news) > 0 {
			first = news[0]
		}
		return len(news)
	}, 3*time.Minute, time.Second).Should(BeNumerically(">", 0), "the first batch launched a replacement")
	// The autoscaler's cleanup comes long after the launch (its
	// max-node-provision-time): by then the controller has listed the
	// replacement and recorded it as the batch's. Terminating it before
	// any listing saw it would test a replacement nobody knew of.
	g.Eventually(func() []string {
		if b := suite.Get(t, ig).Status.RotationBatch; b != nil {
			return b.Pending
		}
		return nil
	}, 2*time.Minute, 500*time.Millisecond).Should(ContainElement(first), "the batch records its replacement")
	_, err = asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(first), ShouldDecrementDesiredCapacity: aws.Bool(true)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string { return suite.EventNotes(t, ig, upgrade.ReasonReplacementForgone) }, 2*time.Minute, time.Second).Should(
		ContainElement(ContainSubstring(first)), "the batch forgoes the replacement Auto Scaling will not launch again")

	// 2. The next batch drains the second old node; its replacement never
	// joins either. Then the autoscaler raises the desired capacity again
	// (pods pending somewhere): that replacement never joins; at the third
	// the rotation stops.
	g.Eventually(func() []string { olds, _ := inGroup(); return olds }, 3*time.Minute, time.Second).Should(HaveLen(1),
		"the next batch replaced the second old instance")
	_, err = asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		c := meta.FindStatusCondition(suite.Get(t, ig).Status.Conditions, v1alpha1.ConditionUpgrading)
		if c == nil {
			return ""
		}
		return c.Reason + ": " + c.Message
	}, 4*time.Minute, time.Second).Should(HavePrefix(upgrade.ReasonRotationStopped+": "), "the rotation stops")
	stopped := suite.Get(t, ig)
	g.Expect(stopped.Status.CurrentState).To(Equal(v1alpha1.StateError))
	g.Expect(stopped.Status.RotationBatch).NotTo(BeNil())
	g.Expect(stopped.Status.RotationBatch.NeverJoined).To(HaveLen(upgrade.MaxNeverJoined))
	g.Expect(stopped.Status.RotationBatch.NeverJoined).To(ContainElement(first))
	g.Expect(suite.EventNotes(t, ig, upgrade.ReasonRotationStopped)).To(ConsistOf(ContainSubstring("version 2 never became Ready nodes")))

	// 3. Stopped: the old node left (the cleanup's decrement let one more
	// batch start) stays, schedulable, and keeps the app; the group
	// launches from the last good version.
	g.Eventually(func() string {
		_, group := suite.ASGTags(t, name)
		if group.LaunchTemplate == nil {
			return ""
		}
		return aws.ToString(group.LaunchTemplate.Version)
	}, time.Minute, time.Second).Should(Equal("1"), "after the stop the group launches from version 1")
	g.Consistently(func(g Gomega) {
		olds, _ := inGroup()
		g.Expect(olds).To(HaveLen(1))
		g.Expect(cordoned()).To(BeEmpty())
		c := meta.FindStatusCondition(suite.Get(t, ig).Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c.Reason).To(Equal(upgrade.ReasonRotationStopped))
	}, 30*time.Second, 2*time.Second).Should(Succeed())
	g.Expect(suite.AvailableReplicas(d)).To(BeEquivalentTo(3))
	close(stop)
	<-done
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(minPods).To(BeNumerically(">=", 2), "the PodDisruptionBudget (minAvailable 2 of 3) held at every sample")
}
