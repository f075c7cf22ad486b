package rotation

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

// TestWeightedGroupBecomesReadyAndRotates: a mixed instances policy with
// weights 1 and 2 makes minSize, maxSize and the desired capacity capacity
// units. The group must become Ready and rotate counting units, as the
// Auto Scaling group does (review finding 5: counting instances, it
// waited for ever).
//
// What moto 5.2.5 emulates of weights: it launches ceil(desired / weight
// of the first override) instances, all of the launch template's instance
// type, and reports no WeightedCapacity per instance (the controller then
// reads the weight of the instance's type from the policy). So with
// t3.large (weight 2) first and as the template's type, minSize 4 is two
// t3.large instances: the accounting under test (2 units each) is real,
// but a group mixing both weights at once cannot be had from moto; the
// unit tests (reconciler/upgrade TestWeightedGroupRotatesInCapacityUnits)
// cover that with the narrowest fake.
func TestWeightedGroupBecomesReadyAndRotates(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-weighted")
	ig := harness.ShortGroup("e2e-weighted", "weighted", 4, 6)
	ig.Spec.EKS.Configuration.InstanceType = "t3.large"
	ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{
		InstanceTypes: []v1alpha1.InstanceTypeSpec{{Type: "t3.large", Weight: 2}, {Type: "t3.medium", Weight: 1}}}
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(2))}}
	suite.Create(t, ig)

	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Expect(ready.Status.CurrentMin).To(Equal(4), "minSize in capacity units")
	g.Expect(suite.GroupNodes(t, ig)).To(HaveLen(2), "two instances of weight 2 hold minSize 4")
	g.Expect(describe(ready)).To(Equal("Ready v1 2/2 surge 0"))
	d := workload(t, ig, 2)

	// Rotate: a label changes the user data, so a new launch template
	// version; maxUnavailable 2 units is one instance of weight 2.
	watch := watchRotation(t, ig, d)
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.Labels["rotation"] = "2"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	g.Eventually(func() string { return describe(suite.Get(t, ig)) }, 6*time.Minute, time.Second).Should(Equal("Ready v2 2/2 surge 0"),
		"both weighted instances rotated")
	minNodes, minPods := watch()
	g.Expect(minNodes).To(BeNumerically(">=", 1), "maxUnavailable 2 units: one instance of weight 2 at a time")
	g.Expect(minPods).To(BeNumerically(">=", 1), "the PodDisruptionBudget is honoured")
	g.Expect(oldInstances(t, ready.Status.ActiveScalingGroupName, "2")).To(BeZero())
	suite.WaitNodesLabelled(t, ig, "rotation", "2", 2, time.Minute)
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{ready.Status.ActiveScalingGroupName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity)).To(BeEquivalentTo(4), "the desired capacity (units) is unchanged")
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}
