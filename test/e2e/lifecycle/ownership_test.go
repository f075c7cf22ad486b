package lifecycle

import (
	"context"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	eksprov "github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// owned lists, in moto, every Auto Scaling group, launch template and IAM
// role whose ownership tag names namespace/name, as "<kind> <name>".
func owned(t *testing.T, namespace, name string) []string {
	t.Helper()
	ctx := context.Background()
	owner := namespace + "/" + name
	var out []string
	groups, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups: %v", err)
	}
	for _, g := range groups.AutoScalingGroups {
		for _, tg := range g.Tags {
			if aws.ToString(tg.Key) == ownership.TagInstanceGroup && aws.ToString(tg.Value) == owner {
				out = append(out, "asg "+aws.ToString(g.AutoScalingGroupName))
			}
		}
	}
	lts, err := ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatalf("DescribeLaunchTemplates: %v", err)
	}
	for _, lt := range lts.LaunchTemplates {
		for _, tg := range lt.Tags {
			if aws.ToString(tg.Key) == ownership.TagInstanceGroup && aws.ToString(tg.Value) == owner {
				out = append(out, "launch-template "+aws.ToString(lt.LaunchTemplateName))
			}
		}
	}
	iamc := iam.NewFromConfig(suite.Env.AWS)
	roles, err := iamc.ListRoles(ctx, &iam.ListRolesInput{})
	if err != nil {
		t.Fatalf("ListRoles: %v", err)
	}
	for _, r := range roles.Roles {
		got, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: r.RoleName})
		if err != nil {
			continue
		}
		for _, tg := range got.Role.Tags {
			if aws.ToString(tg.Key) == ownership.TagInstanceGroup && aws.ToString(tg.Value) == owner {
				out = append(out, "role "+aws.ToString(r.RoleName))
			}
		}
	}
	profiles, err := iamc.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil {
		t.Fatalf("ListInstanceProfiles: %v", err)
	}
	for _, p := range profiles.InstanceProfiles {
		for _, tg := range p.Tags {
			if aws.ToString(tg.Key) == ownership.TagInstanceGroup && aws.ToString(tg.Value) == owner {
				out = append(out, "instance-profile "+aws.ToString(p.InstanceProfileName))
			}
		}
	}
	return out
}

// Two tenants whose namespace and name join to the same string get their
// own resources, and deleting one leaves the other's untouched.
func TestCollidingTenantsGetTheirOwnResources(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "acme")
	suite.Namespace(t, "acme-web")
	a, b := harness.ShortGroup("acme", "web-blue", 1, 2), harness.ShortGroup("acme-web", "blue", 1, 2)
	suite.Create(t, a)
	suite.Create(t, b)
	readyA, readyB := suite.WaitReady(t, a, 120*time.Second), suite.WaitReady(t, b, 120*time.Second)
	g.Expect(readyA.Status.ActiveScalingGroupName).NotTo(Equal(readyB.Status.ActiveScalingGroupName))
	g.Expect(readyA.Status.NodesInstanceRoleArn).NotTo(Equal(readyB.Status.NodesInstanceRoleArn))
	tagsA, _ := suite.ASGTags(t, readyA.Status.ActiveScalingGroupName)
	tagsB, groupB := suite.ASGTags(t, readyB.Status.ActiveScalingGroupName)
	g.Expect(tagsA).To(HaveKeyWithValue(ownership.TagInstanceGroup, "acme/web-blue"))
	g.Expect(tagsA).To(HaveKeyWithValue(ownership.TagUID, string(readyA.UID)))
	g.Expect(tagsB).To(HaveKeyWithValue(ownership.TagInstanceGroup, "acme-web/blue"))
	g.Expect(owned(t, "acme", "web-blue")).To(HaveLen(4), "asg, launch template, role, instance profile of acme/web-blue")
	instancesB := len(groupB.Instances)

	g.Expect(suite.Admin.Delete(ctx, a)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{a}, 120*time.Second)
	g.Expect(owned(t, "acme", "web-blue")).To(BeEmpty(), "everything acme/web-blue created is deleted")
	tagsB, groupB = suite.ASGTags(t, readyB.Status.ActiveScalingGroupName)
	g.Expect(groupB).NotTo(BeNil(), "acme-web/blue's Auto Scaling group survives acme/web-blue's deletion")
	g.Expect(groupB.Instances).To(HaveLen(instancesB))
	g.Expect(tagsB).To(HaveKeyWithValue(ownership.TagInstanceGroup, "acme-web/blue"))
	g.Expect(owned(t, "acme-web", "blue")).To(HaveLen(4))
	g.Expect(suite.Get(t, b).Status.CurrentState).To(Equal(v1alpha1.StateReady))

	g.Expect(suite.Admin.Delete(ctx, b)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{b}, 120*time.Second)
	g.Expect(owned(t, "acme-web", "blue")).To(BeEmpty(), "deleting the groups leaves nothing")
}

// A hand-made Auto Scaling group with the name the controller would use is
// reported on the group and never modified or deleted.
func TestForeignAutoScalingGroupIsReportedNotTouched(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-foreign")
	name := ownership.Name(ownership.LimitLaunchTemplate, suite.Cloud.Cluster, "e2e-foreign", "web")
	ec2c, asc := ec2.NewFromConfig(suite.Env.AWS), autoscaling.NewFromConfig(suite.Env.AWS)
	_, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("hand-made"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(suite.Cloud.AMIs[1]), InstanceType: ec2types.InstanceTypeT3Small}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = ec2c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("hand-made")})
	})
	_, err = asc.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: aws.String(name),
		MinSize: aws.Int32(0), MaxSize: aws.Int32(0), DesiredCapacity: aws.Int32(0), VPCZoneIdentifier: aws.String(suite.Cloud.Subnets[0]),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("hand-made"), Version: aws.String("$Default")},
		Tags:           []astypes.Tag{{Key: aws.String("owner"), Value: aws.String("someone-else"), PropagateAtLaunch: aws.Bool(false)}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = asc.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String(name), ForceDelete: aws.Bool(true)})
	})
	before, _ := suite.ASGTags(t, name)

	ig := harness.ShortGroup("e2e-foreign", "web", 1, 2)
	suite.Create(t, ig)
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		for _, c := range cur.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				return cur.Status.CurrentState + " " + c.Reason + ": " + c.Message
			}
		}
		return cur.Status.CurrentState
	}, 90*time.Second, 500*time.Millisecond).Should(And(HavePrefix("Error "+instancegroup.ReasonForeignResource+": "),
		ContainSubstring(`Auto Scaling group "`+name+`"`), ContainSubstring("no instance-manager ownership tags")))
	_, err = harness.WaitForEvent(ctx, suite.Admin, "e2e-foreign", "web", instancegroup.ReasonForeignResource, name, 30*time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "a ForeignResource Event names the group")

	tags, group := suite.ASGTags(t, name)
	g.Expect(tags).To(Equal(before), "the foreign group's tags are untouched")
	g.Expect(aws.ToInt32(group.MaxSize)).To(BeZero())
	g.Expect(aws.ToString(group.LaunchTemplate.LaunchTemplateName)).To(Equal("hand-made"))

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 120*time.Second)
	_, group = suite.ASGTags(t, name)
	g.Expect(group).NotTo(BeNil(), "deleting the InstanceGroup leaves the foreign Auto Scaling group")
	g.Expect(owned(t, "e2e-foreign", "web")).To(BeEmpty(), "what the group created (launch template, role) is deleted")
}

// Changing clusterName in the defaults is refused while groups have
// resources: to a cluster that does not exist and to another existing one;
// nothing changes, and deleting the groups then leaves nothing.
func TestClusterNameChangeInDefaultsIsRefused(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	suite.SetBoundaries(t, data)
	suite.Namespace(t, "e2e-move")
	ig := harness.ShortGroup("e2e-move", "web", 1, 2)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 120*time.Second)

	_, err := eks.NewFromConfig(suite.Env.AWS).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String("e2e-other-cluster"), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: suite.Cloud.Subnets}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = eks.NewFromConfig(suite.Env.AWS).DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String("e2e-other-cluster")})
	})
	for _, target := range []string{"no-such-cluster", "e2e-other-cluster"} {
		changed := maps.Clone(data)
		changed["defaults"] = strings.Replace(data["defaults"], "clusterName: "+suite.Cloud.Cluster, "clusterName: "+target, 1)
		err := harness.WriteBoundaries(ctx, suite.Admin, changed)
		g.Expect(err).To(HaveOccurred(), "clusterName %s is refused", target)
		g.Expect(err.Error()).To(And(ContainSubstring("e2e-move/web"), ContainSubstring(`clusterName: cannot change from "`+suite.Cloud.Cluster+`" to "`+target+`"`)))
		cm := &corev1.ConfigMap{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: "instance-manager"}, cm)).To(Succeed())
		g.Expect(cm.Data["defaults"]).To(Equal(data["defaults"]), "the ConfigMap is unchanged")
	}
	// A tenant cannot move its group either: clusterName is restricted
	// here, so the admin's value is kept (webhooks/identity_test.go covers
	// the refusal where the tenant's value would stand).
	cur := suite.Get(t, ig)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.EKS.Configuration.ClusterName = "e2e-other-cluster"
	if err := suite.Admin.Patch(ctx, cur, patch); err != nil {
		g.Expect(err).To(MatchError(ContainSubstring("cannot change from")))
	}
	after := suite.Get(t, ig)
	g.Expect(after.Spec.EKS.Configuration.ClusterName).To(Equal(suite.Cloud.Cluster))
	g.Expect(after.Status.ActiveScalingGroupName).To(Equal(ready.Status.ActiveScalingGroupName))

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 120*time.Second)
	g.Expect(owned(t, "e2e-move", "web")).To(BeEmpty(), "deleting the group leaves nothing")
}

// A ConfigMap naming an image or a subnet that does not exist is refused,
// naming it; nothing changes.
func TestConfigMapWithMissingCloudReferencesIsRefused(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	suite.SetBoundaries(t, data)
	for _, c := range []struct{ from, to, want string }{
		{"image: " + suite.Cloud.AMIs[0], "image: ami-windows", `spec.eks.configuration.image "ami-windows" is not an image`},
		{"subnets: [" + suite.Cloud.SubnetNames[0], "subnets: [subnet-0doesnotexist", `spec.eks.configuration.subnets "subnet-0doesnotexist" is not a subnet`},
	} {
		changed := maps.Clone(data)
		changed["defaults"] = strings.Replace(data["defaults"], c.from, c.to, 1)
		g.Expect(changed["defaults"]).NotTo(Equal(data["defaults"]))
		err := harness.WriteBoundaries(ctx, suite.Admin, changed)
		g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		cm := &corev1.ConfigMap{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: "instance-manager"}, cm)).To(Succeed())
		g.Expect(cm.Data["defaults"]).To(Equal(data["defaults"]), "the ConfigMap is unchanged")
	}
	// The same checks on what a tenant sets: an arm64 instance type for the
	// admin's x86_64 image.
	suite.Namespace(t, "e2e-refs")
	ig := harness.ShortGroup("e2e-refs", "arm", 1, 2)
	ig.Spec.EKS.Configuration.InstanceType = "m6g.large"
	err := suite.Admin.Create(ctx, ig)
	g.Expect(err).To(MatchError(And(ContainSubstring(`spec.eks.configuration.image "`+suite.Cloud.AMIs[0]+`" is a x86_64 image; instance type m6g.large runs arm64`),
		ContainSubstring("InstanceGroup e2e-refs/arm"))))
}

// Resources left by a controller killed before its finalizer ran (the
// InstanceGroup removed without it) are found and deleted by the sweep.
func TestSweepDeletesWhatAKilledControllerLeft(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-orphan")
	ig := harness.ShortGroup("e2e-orphan", "web", 1, 2)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 120*time.Second)
	g.Expect(owned(t, "e2e-orphan", "web")).To(HaveLen(4))
	role := ready.Status.NodesInstanceRoleArn

	g.Expect(suite.Manager.Stop()).To(Succeed())
	restarted := false
	defer func() {
		if !restarted {
			m, err := suite.StartManager()
			g.Expect(err).NotTo(HaveOccurred())
			suite.Manager = m
		}
	}()
	// With the controller down its webhooks are down too: let requests
	// through while the group is removed, as after a crash with a
	// bypassed or failed-open webhook.
	restore := webhooksFailOpen(t)
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err
		}
		cur.Finalizers = nil
		return suite.Admin.Update(ctx, cur)
	})).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 120*time.Second)
	restore()
	g.Expect(owned(t, "e2e-orphan", "web")).To(HaveLen(4), "the killed controller left its resources")

	m, err := suite.StartManager()
	g.Expect(err).NotTo(HaveOccurred())
	suite.Manager, restarted = m, true
	opts := suite.ManagerOptions()
	g.Eventually(func() []string { return owned(t, "e2e-orphan", "web") }, 2*opts.GCPeriod+opts.GCGrace+90*time.Second, time.Second).
		Should(BeEmpty(), "the sweep deletes the Auto Scaling group, launch template, role and instance profile")
	auth := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, eksprov.AuthConfigMap, auth)).To(Succeed())
	g.Expect(auth.Data["mapRoles"]).NotTo(ContainSubstring(role), "the aws-auth entry it added is removed")
	g.Eventually(func() []corev1.Node { return suite.GroupNodes(t, ig) }, 60*time.Second, 500*time.Millisecond).Should(BeEmpty())
}

// An aws-auth entry for a role that existed before instance-manager
// survives the create and delete of a group using the same role.
func TestAWSAuthEntryPresentBeforeSurvives(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-byo")
	iamc := iam.NewFromConfig(suite.Env.AWS)
	role, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("e2e-admin-nodes"), AssumeRolePolicyDocument: aws.String(iamrole.NodeTrustPolicy)})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = iamc.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("e2e-admin-nodes")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = iamc.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("e2e-admin-nodes"), RoleName: aws.String("e2e-admin-nodes")})
	g.Expect(err).NotTo(HaveOccurred())
	arn := aws.ToString(role.Role.Arn)
	// editAuth rewrites the mapRoles list of aws-auth (created if missing).
	editAuth := func(edit func([]map[string]any) []map[string]any) {
		edited := func(s string) string {
			var roles []map[string]any
			g.Expect(yaml.Unmarshal([]byte(s), &roles)).To(Succeed())
			out, err := yaml.Marshal(edit(roles))
			g.Expect(err).NotTo(HaveOccurred())
			return string(out)
		}
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm := &corev1.ConfigMap{}
			err := suite.Admin.Get(ctx, eksprov.AuthConfigMap, cm)
			if apierrors.IsNotFound(err) {
				cm.Namespace, cm.Name, cm.Data = eksprov.AuthConfigMap.Namespace, eksprov.AuthConfigMap.Name, map[string]string{"mapRoles": edited("")}
				return suite.Admin.Create(ctx, cm)
			}
			if err != nil {
				return err
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["mapRoles"] = edited(cm.Data["mapRoles"])
			return suite.Admin.Update(ctx, cm)
		})).To(Succeed())
	}
	editAuth(func(roles []map[string]any) []map[string]any {
		return append(roles, map[string]any{"rolearn": arn, "username": "admin-nodes", "groups": []any{"system:masters"}})
	})
	// Node roles are the admin's to choose: the defaults name the role.
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["defaults"] = strings.Replace(data["defaults"], "      securityGroups: [e2e-nodes]\n",
		"      securityGroups: [e2e-nodes]\n      roleName: e2e-admin-nodes\n      instanceProfileName: e2e-admin-nodes\n", 1)
	g.Expect(data["defaults"]).To(ContainSubstring("roleName: e2e-admin-nodes"))
	suite.SetBoundaries(t, data)
	t.Cleanup(func() {
		editAuth(func(roles []map[string]any) []map[string]any {
			kept := roles[:0]
			for _, r := range roles {
				if r["rolearn"] != arn {
					kept = append(kept, r)
				}
			}
			return kept
		})
		_, _ = iamc.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("e2e-admin-nodes"), RoleName: aws.String("e2e-admin-nodes")})
		_, _ = iamc.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("e2e-admin-nodes")})
		_, _ = iamc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("e2e-admin-nodes")})
	})
	// entries returns the mapRoles entries for the role, as
	// "<username> <groups>".
	entries := func() []string {
		cm := &corev1.ConfigMap{}
		g.Expect(suite.Admin.Get(ctx, eksprov.AuthConfigMap, cm)).To(Succeed())
		var roles []struct {
			RoleARN  string   `json:"rolearn"`
			Username string   `json:"username"`
			Groups   []string `json:"groups"`
		}
		g.Expect(yaml.Unmarshal([]byte(cm.Data["mapRoles"]), &roles)).To(Succeed())
		var out []string
		for _, r := range roles {
			if r.RoleARN == arn {
				out = append(out, r.Username+" "+strings.Join(r.Groups, ","))
			}
		}
		return out
	}

	ig := harness.ShortGroup("e2e-byo", "web", 1, 2)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 120*time.Second)
	g.Expect(ready.Status.NodesInstanceRoleArn).To(Equal(arn))
	g.Expect(entries()).To(Equal([]string{"admin-nodes system:masters"}), "the admin's entry is unchanged after create, and no second entry is added")

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 120*time.Second)
	g.Expect(entries()).To(Equal([]string{"admin-nodes system:masters"}), "the admin's entry survives the delete")
	_, err = iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("e2e-admin-nodes")})
	g.Expect(err).NotTo(HaveOccurred(), "a bring-your-own role is never deleted")
	_, err = iamc.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("e2e-admin-nodes")})
	g.Expect(err).NotTo(HaveOccurred(), "a bring-your-own instance profile is never deleted")
}

// A manifest in keikoproj instance-manager's spellings is accepted and
// stored in the canonical spelling (kubectl apply --dry-run=server).
func TestUpstreamSpellingsAreNormalised(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	// The admin opens the paths the manifest sets (they are admin-only
	// otherwise).
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["boundaries"] = strings.Replace(data["boundaries"], "  replace:\n  - spec.strategy\n",
		"  replace:\n  - spec.strategy\n  - spec.eks.configuration.volumes\n  - spec.eks.configuration.lifecycleHooks\n  - spec.eks.configuration.metadataOptions\n", 1)
	g.Expect(data["boundaries"]).To(ContainSubstring("lifecycleHooks"))
	suite.SetBoundaries(t, data)
	suite.Namespace(t, "e2e-spelling")
	manifest := `apiVersion: instancemgr.keikoproj.io/v1alpha1
kind: InstanceGroup
metadata:
  name: upstream
  namespace: e2e-spelling
spec:
  provisioner: eks
  strategy:
    type: rollingupdate
    rollingUpdate:
      maxUnavailable: 1
  eks:
    minSize: 1
    maxSize: 2
    configuration:
      instanceType: t3.medium
      volumes:
      - name: /dev/xvda
        type: GP3
        size: 32
      metadataOptions:
        httpTokens: Required
      mixedInstancesPolicy:
        strategy: capacity-optimized
        spotRatio: 50%
        instanceTypes:
        - type: t3.medium
        - type: t3.large
      lifecycleHooks:
      - name: on-launch
        lifecycle: Launch
        defaultResult: CONTINUE
        heartbeatTimeout: 300
      - name: on-terminate
        lifecycle: TERMINATE
        defaultResult: continue
        heartbeatTimeout: 300
`
	want := []string{"type: rollingUpdate", "type: gp3", "httpTokens: required", "strategy: CapacityOptimized",
		"lifecycle: launch", "lifecycle: terminate", "defaultResult: continue"}
	var shown string
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", suite.Env.Kubeconfig, "apply", "--dry-run=server", "-o", "yaml", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.Output()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl apply --dry-run=server: %s", out)
		var obj map[string]any
		g.Expect(yaml.Unmarshal(out, &obj)).To(Succeed())
		raw, err := yaml.Marshal(obj["spec"])
		g.Expect(err).NotTo(HaveOccurred())
		shown = string(raw)
	} else {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(manifest), &u.Object)).To(Succeed())
		g.Expect(suite.Admin.Create(ctx, u, client.DryRunAll)).To(Succeed())
		raw, err := yaml.Marshal(u.Object["spec"])
		g.Expect(err).NotTo(HaveOccurred())
		shown = string(raw)
	}
	for _, w := range want {
		g.Expect(shown).To(ContainSubstring(w), "the dry run shows the canonical form")
	}
	g.Expect(shown).NotTo(ContainSubstring("rollingupdate"))
	g.Expect(apierrors.IsNotFound(suite.Admin.Get(ctx, client.ObjectKey{Namespace: "e2e-spelling", Name: "upstream"}, &v1alpha1.InstanceGroup{}))).To(BeTrue(), "a dry run stores nothing")
}

// webhooksFailOpen sets the InstanceGroup webhooks to failurePolicy Ignore
// and returns a func that sets them back to Fail.
func webhooksFailOpen(t *testing.T) func() {
	t.Helper()
	ctx := context.Background()
	set := func(policy admissionregistrationv1.FailurePolicyType) {
		NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
			if err := suite.Admin.List(ctx, m); err != nil {
				return err
			}
			for i := range m.Items {
				for j := range m.Items[i].Webhooks {
					if strings.HasPrefix(m.Items[i].Webhooks[j].Name, "instancegroups.") {
						m.Items[i].Webhooks[j].FailurePolicy = &policy
					}
				}
				if err := suite.Admin.Update(ctx, &m.Items[i]); err != nil {
					return err
				}
			}
			v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
			if err := suite.Admin.List(ctx, v); err != nil {
				return err
			}
			for i := range v.Items {
				for j := range v.Items[i].Webhooks {
					if strings.HasPrefix(v.Items[i].Webhooks[j].Name, "instancegroups.") {
						v.Items[i].Webhooks[j].FailurePolicy = &policy
					}
				}
				if err := suite.Admin.Update(ctx, &v.Items[i]); err != nil {
					return err
				}
			}
			return nil
		})).To(Succeed())
	}
	set(admissionregistrationv1.Ignore)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			set(admissionregistrationv1.Fail)
		}
	}
	t.Cleanup(restore)
	return restore
}
