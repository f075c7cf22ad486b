package rotation

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/harness"
)

// TestStandbyAndAnAutoscalerCleanupLeaveTheRotationFinishing: during a
// maxSurge rotation, one drifted instance is in Standby (EnterStandby,
// without a decrement: Auto Scaling launches a replacement for it) and
// the first replacement never registers and is terminated with
// ShouldDecrementDesiredCapacity=true, as the cluster-autoscaler's cleanup
// of unregistered nodes does. The Standby instance is never drained nor
// terminated; the batch forgoes the replacement Auto Scaling will not
// launch again (ReplacementForgone naming it); the rotation finishes
// (issue 36 item 2; before, it waited for that replacement for good).
func TestStandbyAndAnAutoscalerCleanupLeaveTheRotationFinishing(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-standby"
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "standby", 2, 6)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: time.Hour}}
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	name := ready.Status.ActiveScalingGroupName
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	_, err := asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 3*time.Minute, time.Second).Should(Equal(3))

	// One old instance goes to Standby (without a decrement: Auto Scaling
	// launches an old-version replacement for it, rotated like the rest).
	_, group := suite.ASGTags(t, name)
	standby := aws.ToString(group.Instances[0].InstanceId)
	_, err = asg.EnterStandby(ctx, &autoscaling.EnterStandbyInput{AutoScalingGroupName: aws.String(name),
		InstanceIds: []string{standby}, ShouldDecrementDesiredCapacity: aws.Bool(false)})
	g.Expect(err).NotTo(HaveOccurred())
	old := map[string]bool{}
	g.Eventually(func() int {
		_, group := suite.ASGTags(t, name)
		for _, in := range group.Instances {
			old[aws.ToString(in.InstanceId)] = true
		}
		return harness.Available(suite.GroupNodes(t, ig))
	}, 3*time.Minute, time.Second).Should(BeNumerically(">=", 3), "the Standby instance's replacement joined")

	// The first instance launched for the rotation never registers.
	var mu sync.Mutex
	var unregistered string
	suite.Env.Bridge.SetNeverJoin(func(group, id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(group, ns) || old[id] {
			return false
		}
		if unregistered == "" {
			unregistered = id
		}
		return id == unregistered
	})
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoin(nil) })

	cur := suite.Get(t, ig)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, cur, patch)).To(Succeed())

	// The cluster-autoscaler's cleanup: once the batch recorded the
	// replacement, it is terminated with a decrement.
	var first string
	g.Eventually(func() bool {
		mu.Lock()
		first = unregistered
		mu.Unlock()
		b := suite.Get(t, ig).Status.RotationBatch
		return first != "" && b != nil && slices.Contains(b.Pending, first)
	}, 3*time.Minute, 500*time.Millisecond).Should(BeTrue(), "the batch records the replacement that never registers")
	_, err = asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(first), ShouldDecrementDesiredCapacity: aws.Bool(true)})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = harness.WaitForEvent(ctx, suite.Admin, ns, ig.Name, upgrade.ReasonReplacementForgone, first, 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred(), "the batch forgoes the replacement removed with a decrement")

	// The rotation finishes: nothing drifted but the Standby instance,
	// which is still in Standby, its node never cordoned.
	g.Eventually(func(g Gomega) {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
		g.Expect(cur.Status.SurgeCapacity).To(BeZero())
		g.Expect(cur.Status.RotationBatch).To(BeNil())
		_, group := suite.ASGTags(t, name)
		for _, in := range group.Instances {
			id := aws.ToString(in.InstanceId)
			if id == standby {
				g.Expect(string(in.LifecycleState)).To(Equal("Standby"))
				continue
			}
			if !strings.HasPrefix(string(in.LifecycleState), "Terminating") {
				g.Expect(old[id]).To(BeFalse(), "old instance %s still in service", id)
			}
		}
	}, 10*time.Minute, 2*time.Second).Should(Succeed())
	for _, n := range suite.GroupNodes(t, ig) {
		if strings.HasSuffix(n.Spec.ProviderID, "/"+standby) {
			g.Expect(n.Spec.Unschedulable).To(BeFalse(), "the Standby instance's node was cordoned")
		}
	}
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}
