package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
	"github.com/instancemgr/instance-manager/test/harness"
)

// An eks-managed group deleted with its finalizer removed by hand (its
// node group, node role and launch template stay) and created again under
// the same name (review 2026-11-26 M4, issue 26 item 6): the new group
// adopts its earlier self's node group (retagged with its UID, one Adopted
// Event naming the node group, role and template), becomes Ready on that
// same node group, and deleting it leaves nothing behind.
func TestARecreatedManagedGroupAdoptsItsNodeGroup(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-adoptmanaged"
	suite.Namespace(t, ns)
	group := func() *v1alpha1.InstanceGroup {
		return &v1alpha1.InstanceGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
			Spec: v1alpha1.InstanceGroupSpec{
				Provisioner: v1alpha1.ProvisionerEKSManaged,
				Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
				EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{
					ClusterName: suite.Cloud.Cluster, Subnets: []string{suite.Cloud.Subnets[0]}, InstanceType: "m5.large",
				}},
			},
		}
	}

	first := group()
	suite.Create(t, first)
	ready := suite.WaitReady(t, first, 2*time.Minute)
	oldUID := string(ready.UID)
	name := ownership.Name(ownership.LimitNodegroup, suite.Cloud.Cluster, ns, "workers")
	role := ownership.Name(ownership.LimitIAMRole, suite.Cloud.Cluster, ns, "workers")
	tmpl := eksmanaged.TemplateName(ready)
	g.Expect(ready.Status.ActiveScalingGroupName).To(Equal(name))
	g.Expect(managedUIDs(t, name, role, tmpl)).To(Equal([3]string{oldUID, oldUID, oldUID}))

	before, err := describeNodegroup(t, suite.Cloud.Cluster, name)
	g.Expect(err).NotTo(HaveOccurred())

	removeWithoutFinalizer(t, first)
	_, err = describeNodegroup(t, suite.Cloud.Cluster, name)
	g.Expect(err).NotTo(HaveOccurred(), "the premise: node group %s outlives its group", name)

	second := group()
	suite.Create(t, second)
	ready = suite.WaitReady(t, second, 2*time.Minute)
	newUID := string(ready.UID)
	g.Expect(newUID).NotTo(Equal(oldUID))
	g.Expect(ready.Status.ActiveScalingGroupName).To(Equal(name), "Ready on the same node group")
	// The same node group, not one of the same name made again after the
	// garbage collector swept the first (its ARN ends in an id EKS gives
	// each node group it creates).
	after, err := describeNodegroup(t, suite.Cloud.Cluster, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.ToString(after.NodegroupArn)).To(Equal(aws.ToString(before.NodegroupArn)), "node group %s is adopted, not created again", name)
	g.Expect(ready.Status.RetiringScalingGroupNames).To(BeEmpty())
	g.Expect(managedUIDs(t, name, role, tmpl)).To(Equal([3]string{newUID, newUID, newUID}), "each resource is retagged with the new uid")
	ev, err := harness.WaitForEvent(ctx, suite.Admin, ns, "workers", providers.ReasonAdopted, "EKS node group "+name, 30*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ev.Note).To(And(ContainSubstring("IAM role "+role), ContainSubstring("launch template "+tmpl), ContainSubstring(oldUID)),
		"one Event names every resource adopted")
	g.Expect(harness.Condition(suite.Get(t, second), v1alpha1.ConditionReady)).To(Equal(metav1.ConditionTrue))

	g.Expect(suite.Admin.Delete(ctx, second.DeepCopy())).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{second}, 2*time.Minute)
	g.Eventually(func() bool {
		_, err := describeNodegroup(t, suite.Cloud.Cluster, name)
		return isNotFound(err)
	}, time.Minute, time.Second).Should(BeTrue(), "node group %s is deleted", name)
	roleGone(t, role)
	_, err = ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{tmpl}})
	g.Expect(err).To(MatchError(ContainSubstring("NotFound")), "launch template %s is deleted", tmpl)
}

// managedUIDs are the ownership.TagUID values of the node group, the node
// role and the launch template.
func managedUIDs(t *testing.T, nodegroup, role, tmpl string) [3]string {
	t.Helper()
	ctx := context.Background()
	var out [3]string
	ng, err := describeNodegroup(t, suite.Cloud.Cluster, nodegroup)
	if err != nil {
		t.Fatalf("DescribeNodegroup %s: %v", nodegroup, err)
	}
	out[0] = ng.Tags[ownership.TagUID]
	r, err := iam.NewFromConfig(suite.Env.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	if err != nil {
		t.Fatalf("GetRole %s: %v", role, err)
	}
	out[1] = ownership.TagMap(r.Role.Tags, func(t iamtypes.Tag) *string { return t.Key }, func(t iamtypes.Tag) *string { return t.Value })[ownership.TagUID]
	lts, err := ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{tmpl}})
	if err != nil || len(lts.LaunchTemplates) == 0 {
		t.Fatalf("DescribeLaunchTemplates %s: %v", tmpl, err)
	}
	out[2] = ownership.TagMap(lts.LaunchTemplates[0].Tags, func(t ec2types.Tag) *string { return t.Key }, func(t ec2types.Tag) *string { return t.Value })[ownership.TagUID]
	return out
}
