package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eksfargate"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
	"github.com/instancemgr/instance-manager/test/harness"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// A managed node group and a Fargate profile tagged for InstanceGroups
// that do not exist (a controller that crashed before its status landed,
// an identity switch: review 2026-11-26 N10) are swept after the grace:
// the node group's Node drained first, the profile's pod evicted first,
// then the node group, the profile and the node role. A live group's
// Fargate profile in the same cluster is left alone.
func TestSweepDeletesOrphanedNodegroupAndFargateProfile(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-gc")
	g.Expect(ownership.Installation()).NotTo(BeEmpty())
	cluster := suite.Cloud.Cluster

	// A live group in the cluster: its profile stays.
	alive := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-gc", Name: "alive"},
		Spec: v1alpha1.InstanceGroupSpec{
			Provisioner: v1alpha1.ProvisionerEKSFargate,
			Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: cluster, Subnets: suite.Cloud.Subnets,
				Selectors: []v1alpha1.EKSFargateSelector{{Namespace: "e2e-gc", Labels: map[string]string{"tier": "alive"}}}},
		},
	}
	g.Expect(suite.Admin.Create(ctx, alive)).To(Succeed())
	aliveProfile := suite.WaitReady(t, alive, 2*time.Minute).Status.ActiveScalingGroupName
	t.Cleanup(func() {
		_ = suite.Admin.Delete(ctx, alive)
	})

	// The orphans, as a crashed controller leaves them: our tags, no group.
	api := eks.NewFromConfig(suite.Env.AWS)
	iamc := iam.NewFromConfig(suite.Env.AWS)
	mngOwner := ownership.Owner{Cluster: cluster, Namespace: "e2e-gc", Name: "gone-mng", UID: "0b7f5c2e-uid-gone-mng"}
	fgOwner := ownership.Owner{Cluster: cluster, Namespace: "e2e-gc", Name: "gone-fargate", UID: "0b7f5c2e-uid-gone-fargate"}
	ngName := ownership.Name(ownership.LimitNodegroup, cluster, mngOwner.Namespace, mngOwner.Name)
	roleName := ownership.Name(ownership.LimitIAMRole, cluster, mngOwner.Namespace, mngOwner.Name)
	profileName := ownership.Name(ownership.LimitFargateProfile-9, cluster, fgOwner.Namespace, fgOwner.Name) + "-0badc0de"
	var roleTags []iamtypes.Tag
	for k, v := range mngOwner.Tags() {
		roleTags = append(roleTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	role, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(roleName), Path: aws.String("/instance-manager/"),
		AssumeRolePolicyDocument: aws.String(iamrole.NodeTrustPolicy), Tags: roleTags})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = api.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ngName),
		NodeRole: role.Role.Arn, Subnets: suite.Cloud.Subnets, Tags: mngOwner.Tags(),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(2), DesiredSize: aws.Int32(1)}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = api.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{ClusterName: aws.String(cluster), FargateProfileName: aws.String(profileName),
		PodExecutionRoleArn: role.Role.Arn, Subnets: suite.Cloud.Subnets, Tags: fgOwner.Tags(),
		Selectors: []ekstypes.FargateProfileSelector{{Namespace: aws.String("e2e-gc"), Labels: map[string]string{"tier": "gone"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = api.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(ngName)})
		_, _ = api.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: aws.String(cluster), FargateProfileName: aws.String(profileName)})
		_, _ = iamc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(roleName)})
	})

	// What runs on them: a Node of the node group, and a pod of the
	// profile (pending: moto runs no Fargate).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gc-ng-node", Labels: map[string]string{eksmanaged.LabelNodegroup: ngName}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0e2egc0000000001"}}
	g.Expect(suite.Admin.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = suite.Admin.Delete(ctx, node) })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-gc", Name: "gone-batch", Labels: map[string]string{eksfargate.LabelProfile: profileName, "tier": "gone"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"e2e-gc": "nowhere"}, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	g.Expect(suite.Admin.Create(ctx, pod)).To(Succeed())

	opts := suite.ManagerOptions()
	deadline := 3*opts.GCPeriod + opts.GCGrace + 90*time.Second
	g.Eventually(func() bool {
		_, err := describeNodegroup(t, cluster, ngName)
		return isNotFound(err)
	}, deadline, time.Second).Should(BeTrue(), "the orphaned node group is deleted")
	// Its Node was drained first: cordoned by the drain runner.
	cur := &corev1.Node{}
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(node), cur)).To(Succeed())
	g.Expect(cur.Spec.Unschedulable).To(BeTrue(), "the node group's Node was cordoned and drained before the node group was deleted")
	g.Expect(cur.Annotations).To(HaveKey(drain.AnnotationDrainStarted))

	g.Eventually(func() bool {
		_, err := api.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: aws.String(cluster), FargateProfileName: aws.String(profileName)})
		return isNotFound(err)
	}, deadline, time.Second).Should(BeTrue(), "the orphaned Fargate profile is deleted")
	err = suite.Admin.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the profile's pod was evicted before the profile was deleted: %v", err)

	g.Eventually(func() error {
		_, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
		return err
	}, deadline, time.Second).Should(MatchError(ContainSubstring("NoSuchEntity")), "the orphan's node role is deleted after its node group")

	_, err = api.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: aws.String(cluster), FargateProfileName: aws.String(aliveProfile)})
	g.Expect(err).NotTo(HaveOccurred(), "a live group's profile is left")
	g.Expect(suite.Admin.Delete(ctx, alive)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{alive}, 2*time.Minute)
}
