package lifecycle

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A group deleted with its finalizer removed by hand (so its cloud
// resources stay) and created again under the same name, as Argo CD or
// Flux would (review 2026-11-26 M4): the new group adopts its earlier
// self's Auto Scaling group, launch template and role (retagged with its
// UID, an Adopted Event), becomes Ready, the garbage collector leaves what
// it adopted, and deleting it leaves nothing behind.
func TestARecreatedGroupAdoptsWhatItsEarlierSelfLeft(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-recreate"
	suite.Namespace(t, ns)

	first := harness.ShortGroup(ns, "web", 1, 2)
	suite.Create(t, first)
	ready := suite.WaitReady(t, first, 3*time.Minute)
	oldUID := ready.UID
	asg, lt, role := eks.GroupName(ready), eks.GroupName(ready), eks.RoleName(ready)
	g.Expect(resourceUIDs(t, asg, lt, role)).To(Equal([3]string{string(oldUID), string(oldUID), string(oldUID)}))

	removeWithoutFinalizer(t, first)
	// The premise: what the first group built is still there.
	g.Expect(scalingGroupExists(t, asg)).To(BeTrue(), "Auto Scaling group %s outlives its group", asg)

	second := harness.ShortGroup(ns, "web", 1, 2)
	suite.Create(t, second)
	ready = suite.WaitReady(t, second, 3*time.Minute)
	g.Expect(ready.UID).NotTo(Equal(oldUID))
	newUID := string(ready.UID)
	g.Expect(resourceUIDs(t, asg, lt, role)).To(Equal([3]string{newUID, newUID, newUID}), "each resource is retagged with the new uid")
	ev, err := harness.WaitForEvent(ctx, suite.Admin, ns, "web", providers.ReasonAdopted, "Auto Scaling group "+asg, 30*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ev.Note).To(And(ContainSubstring("IAM role "+role), ContainSubstring("launch template "+lt), ContainSubstring(string(oldUID))),
		"one Event names every resource adopted")

	// The garbage collector (period 3 s, grace 5 s here) leaves what the
	// live group adopted.
	g.Consistently(func() bool { return scalingGroupExists(t, asg) }, 15*time.Second, time.Second).Should(BeTrue(),
		"the garbage collector leaves the adopted Auto Scaling group %s", asg)
	g.Expect(harness.Condition(suite.Get(t, second), v1alpha1.ConditionReady)).To(Equal(metav1.ConditionTrue))

	g.Expect(suite.Admin.Delete(ctx, second.DeepCopy())).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{second}, 3*time.Minute)
	g.Eventually(func() bool { return scalingGroupExists(t, asg) }, time.Minute, time.Second).Should(BeFalse(), "Auto Scaling group %s is deleted", asg)
	_, err = ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{lt}})
	g.Expect(err).To(MatchError(ContainSubstring("NotFound")), "launch template %s is deleted", lt)
	roleGone(t, role)
}

// removeWithoutFinalizer deletes ig as someone who removed its finalizer
// by hand does: the controller never runs its deletion. The finalizer is
// removed with the object's resourceVersion as a precondition of the
// delete, so a finalizer the controller puts back meanwhile makes the
// delete fail (and it is tried again) rather than run the controller's.
func removeWithoutFinalizer(t *testing.T, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		cur := &v1alpha1.InstanceGroup{}
		err := suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), cur)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil, "resourceVersion": cur.ResourceVersion}})
		if err := suite.Admin.Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		return suite.Admin.Delete(ctx, cur, client.Preconditions{ResourceVersion: &cur.ResourceVersion})
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 10*time.Second)
}

// resourceUIDs are the ownership.TagUID values of the Auto Scaling group,
// the launch template and the IAM role.
func resourceUIDs(t *testing.T, asg, lt, role string) [3]string {
	t.Helper()
	ctx := context.Background()
	var out [3]string
	groups, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
	if err != nil || len(groups.AutoScalingGroups) == 0 {
		t.Fatalf("DescribeAutoScalingGroups %s: %v (%d found)", asg, err, len(groups.AutoScalingGroups))
	}
	out[0] = ownership.TagMap(groups.AutoScalingGroups[0].Tags, func(t astypes.TagDescription) *string { return t.Key }, func(t astypes.TagDescription) *string { return t.Value })[ownership.TagUID]
	lts, err := ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{lt}})
	if err != nil || len(lts.LaunchTemplates) == 0 {
		t.Fatalf("DescribeLaunchTemplates %s: %v", lt, err)
	}
	out[1] = ownership.TagMap(lts.LaunchTemplates[0].Tags, func(t ec2types.Tag) *string { return t.Key }, func(t ec2types.Tag) *string { return t.Value })[ownership.TagUID]
	r, err := iam.NewFromConfig(suite.Env.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	if err != nil {
		t.Fatalf("GetRole %s: %v", role, err)
	}
	out[2] = ownership.TagMap(r.Role.Tags, func(t iamtypes.Tag) *string { return t.Key }, func(t iamtypes.Tag) *string { return t.Value })[ownership.TagUID]
	return out
}
