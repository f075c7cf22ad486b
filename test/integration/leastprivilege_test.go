package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

// The least-privilege settings the integration manager runs with
// (main_test.go): its own cluster, the other clusters the suite's
// manifests name, and a permissions boundary for the roles it creates.
const (
	lpHomeCluster = "a-managed-cluster"
	lpMotoCluster = "lp-moto-cluster" // created in moto by TestCreatedRolesAndLaunchTemplatesInMoto
	lpBoundary    = "arn:aws:iam::123456789012:policy/instance-manager-node-boundary"
)

// lpShared shares the sensitive paths these tests set (boundaries.SensitivePaths
// are admin-only otherwise): the allowlists then decide which values pass.
const lpShared = `shared:
  replace:
  - spec.eks.configuration.clusterName
  - spec.eks.configuration.image
  - spec.eks.configuration.subnets
  - spec.eks.configuration.securityGroups
  - spec.eks.configuration.roleName
  - spec.eks.configuration.instanceProfileName
  - spec.eks.configuration.managedPolicies
  - spec.eks.configuration.volumes
`

var lpAdditionalClusters = []string{"my-eks-cluster", "the-cluster-for-my-pods", "system-cluster", "prod", lpMotoCluster}

// lpGroup is a complete eks group of the manager's own cluster with the
// given image; mutate adds what a case names.
func lpGroup(namespace, name, image string, mutate func(c *v1alpha1.EKSConfiguration)) *v1alpha1.InstanceGroup {
	ig := fullIG(namespace, name)
	ig.Spec.EKS.Configuration.ClusterName, ig.Spec.EKS.Configuration.Image = lpHomeCluster, image
	mutate(ig.Spec.EKS.Configuration)
	return ig
}

// firstMotoImage returns an AMI moto offers and its owner account.
func firstMotoImage(t *testing.T) (id, owner string) {
	t.Helper()
	out, err := ec2.NewFromConfig(environment.AWS).DescribeImages(context.Background(), &ec2.DescribeImagesInput{})
	if err != nil || len(out.Images) == 0 {
		t.Fatalf("moto DescribeImages: %d images, %v", len(out.Images), err)
	}
	return awssdk.ToString(out.Images[0].ImageId), awssdk.ToString(out.Images[0].OwnerId)
}

func TestTenantReferencesOutsideTheAllowlistsAreRefused(t *testing.T) {
	requireEnv(t)
	image, owner := firstMotoImage(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared, "allowlists": fmt.Sprintf(`roles: [team-lp-*]
instanceProfiles: [team-lp-*]
managedPolicies: ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy", AmazonS3ReadOnlyAccess]
snapshots: [snap-0aaaaaaaaaaaaaaaa]
ssmParameterPrefixes: [/aws/service/, /platform/images/]
imageOwners: ["%s"]
subnets: [subnet-sys]
securityGroups: [sg-sys]
`, owner)})
	tn := newTenant(t, "mallory", "team-lp")
	ctx := context.Background()

	for _, tc := range []struct {
		name   string
		mutate func(c *v1alpha1.EKSConfiguration)
		want   []string // all in the refusal
	}{
		{"a role of another team", func(c *v1alpha1.EKSConfiguration) { c.RoleName, c.InstanceProfileName = "ci-admin", "ci-admin" },
			[]string{"spec.eks.configuration.roleName", `"ci-admin" is not allowed by the boundary ConfigMap's data.allowlists.roles (allowed: team-lp-*)`,
				"spec.eks.configuration.instanceProfileName", "data.allowlists.instanceProfiles"}},
		{"AdministratorAccess", func(c *v1alpha1.EKSConfiguration) { c.ManagedPolicies = []string{"AdministratorAccess"} },
			[]string{"spec.eks.configuration.managedPolicies[0]", `"arn:aws:iam::aws:policy/AdministratorAccess" is not allowed by the boundary ConfigMap's data.allowlists.managedPolicies`}},
		{"another team's snapshot", func(c *v1alpha1.EKSConfiguration) {
			c.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdf", SnapshotID: "snap-0bbbbbbbbbbbbbbbb"}}
		}, []string{"spec.eks.configuration.volumes[0].snapshotId", "data.allowlists.snapshots (allowed: snap-0aaaaaaaaaaaaaaaa)"}},
		{"a secret SSM parameter", func(c *v1alpha1.EKSConfiguration) { c.Image = "ssm:///prod/db/password" },
			[]string{"spec.eks.configuration.image", "data.allowlists.ssmParameterPrefixes (allowed: /aws/service/, /platform/images/)"}},
		{"an image of another owner", func(c *v1alpha1.EKSConfiguration) { c.Image = "ami-0aaaaaaaaaaaaaaaa" },
			[]string{"spec.eks.configuration.image", "data.allowlists.imageOwners"}},
		{"another team's subnet and security group", func(c *v1alpha1.EKSConfiguration) {
			c.Subnets, c.SecurityGroups = []string{"subnet-payments"}, []string{"sg-payments-db"}
		}, []string{"spec.eks.configuration.subnets[0]", "data.allowlists.subnets (allowed: subnet-sys)", "spec.eks.configuration.securityGroups[0]", "data.allowlists.securityGroups"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ig := lpGroup(tn.namespace, "refused", image, tc.mutate)
			err := tn.client.Create(ctx, ig)
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "want a refusal, got %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(err.Error()).To(ContainSubstring("InstanceGroup team-lp/refused"))
		})
	}

	t.Run("loosened instance metadata is the admin's to set", func(t *testing.T) {
		g := NewWithT(t)
		ig := lpGroup(tn.namespace, "imds", image, func(c *v1alpha1.EKSConfiguration) {
			c.MetadataOptions = &v1alpha1.MetadataOptions{HttpTokens: "optional", HttpPutResponseHopLimit: 64}
		})
		tn.warnings.take()
		err := tn.client.Create(ctx, ig, client.DryRunAll)
		if err != nil { // enforcement deny, or a refusal: either keeps IMDS as the admin set it
			g.Expect(err.Error()).To(ContainSubstring("metadataOptions"))
			return
		}
		g.Expect(ig.Spec.EKS.Configuration.MetadataOptions).To(BeNil(), "the tenant's IMDS settings must not reach the stored spec")
		g.Expect(strings.Join(tn.warnings.take(), "\n")).To(ContainSubstring("metadataOptions"), "the tenant is told why")
	})

	t.Run("what the allowlists name is admitted", func(t *testing.T) {
		g := NewWithT(t)
		ig := lpGroup(tn.namespace, "allowed", image, func(c *v1alpha1.EKSConfiguration) {
			c.RoleName, c.InstanceProfileName = "team-lp-nodes", "team-lp-nodes"
			c.ManagedPolicies = []string{"AmazonS3ReadOnlyAccess"}
			c.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdf", SnapshotID: "snap-0aaaaaaaaaaaaaaaa"}}
		})
		g.Expect(tn.client.Create(ctx, ig, client.DryRunAll)).To(Succeed())
	})
}

func TestGroupNamingAnotherClusterIsRefused(t *testing.T) {
	requireEnv(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared})
	ctx := context.Background()
	for _, ns := range []string{"team-lp", configNamespace} {
		t.Run(ns, func(t *testing.T) {
			g := NewWithT(t)
			tn := newTenant(t, "mallory-"+ns, ns)
			ig := lpGroup(ns, "elsewhere", "ami-0aaaaaaaaaaaaaaaa", func(c *v1alpha1.EKSConfiguration) { c.ClusterName = "someone-elses-cluster" })
			err := tn.client.Create(ctx, ig)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(`spec.eks.configuration.clusterName: Forbidden: "someone-elses-cluster" is not allowed`))
			g.Expect(err.Error()).To(ContainSubstring("the controller's own clusters: " + lpHomeCluster))
		})
	}
}

// TestCreatedRolesAndLaunchTemplatesInMoto lets the controller build a
// group in moto and reads back what it created: the launch template
// requires IMDSv2 with a hop limit of 1, and the node role and instance
// profile sit under /instance-manager/ with the permissions boundary.
func TestCreatedRolesAndLaunchTemplatesInMoto(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	image, _ := firstMotoImage(t)
	subnet, sg := lpMotoNetwork(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared})
	tn := newTenant(t, "lp-builder", "team-lp-moto")

	ig := fullIG(tn.namespace, "web")
	c := ig.Spec.EKS.Configuration
	c.ClusterName, c.Image, c.Subnets, c.SecurityGroups = lpMotoCluster, image, []string{subnet}, []string{sg}
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 1
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	t.Cleanup(func() { deleteAndWait(t, tn.namespace, ig.Name) })

	owner := tn.namespace + "/" + ig.Name
	ec2c := ec2.NewFromConfig(environment.AWS)
	var data *ec2types.ResponseLaunchTemplateData
	var seen []string
	g.Eventually(func() bool {
		out, err := ec2c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
		if err != nil {
			seen = []string{err.Error()}
			return false
		}
		seen = nil
		for _, lt := range out.LaunchTemplates {
			seen = append(seen, awssdk.ToString(lt.LaunchTemplateName))
			if tagOf(lt.Tags, "instancemgr.keikoproj.io/instancegroup") != owner {
				continue
			}
			v, err := ec2c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{"$Latest"}})
			if err == nil && len(v.LaunchTemplateVersions) == 1 {
				data = v.LaunchTemplateVersions[0].LaunchTemplateData
				return true
			}
		}
		return false
	}, 3*harness.ConvergeTimeout, time.Second).Should(BeTrue(), func() string {
		return fmt.Sprintf("awaited a launch template tagged %s in moto; saw %v; group status %+v", owner, seen, getIG(t, tn.namespace, ig.Name).Status)
	})
	g.Expect(data.MetadataOptions).NotTo(BeNil(), "the launch template has no metadata options: the account default (maybe IMDSv1) applies")
	g.Expect(data.MetadataOptions.HttpTokens).To(Equal(ec2types.LaunchTemplateHttpTokensStateRequired))
	g.Expect(awssdk.ToInt32(data.MetadataOptions.HttpPutResponseHopLimit)).To(Equal(int32(1)))
	g.Expect(data.IamInstanceProfile).NotTo(BeNil())
	profileName := awssdk.ToString(data.IamInstanceProfile.Name)

	iamc := iam.NewFromConfig(environment.AWS)
	var profile *iam.GetInstanceProfileOutput
	g.Eventually(func() error {
		var err error
		profile, err = iamc.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(profileName)})
		if err == nil && len(profile.InstanceProfile.Roles) == 0 {
			err = fmt.Errorf("instance profile %s holds no role yet", profileName)
		}
		return err
	}, harness.ConvergeTimeout, time.Second).Should(Succeed(), "awaited the group's instance profile and its role in moto")
	g.Expect(awssdk.ToString(profile.InstanceProfile.Path)).To(Equal("/instance-manager/"), "instance profile path")
	roleName := awssdk.ToString(profile.InstanceProfile.Roles[0].RoleName)
	role, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(roleName)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awssdk.ToString(role.Role.Path)).To(Equal("/instance-manager/"), "role path")
	g.Expect(awssdk.ToString(role.Role.Arn)).To(HaveSuffix(":role/instance-manager/" + roleName))
	g.Expect(role.Role.PermissionsBoundary).NotTo(BeNil(), "role %s has no permissions boundary", roleName)
	g.Expect(awssdk.ToString(role.Role.PermissionsBoundary.PermissionsBoundaryArn)).To(Equal(lpBoundary))
}

// lpMotoNetwork creates, in moto, a VPC with a subnet and a security group
// and the EKS cluster lpMotoCluster on them (removed after the test).
func lpMotoNetwork(t *testing.T) (subnet, securityGroup string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ec2c := ec2.NewFromConfig(environment.AWS)
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: awssdk.String("10.42.0.0/16")})
	g.Expect(err).NotTo(HaveOccurred())
	sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: awssdk.String("10.42.1.0/24"), AvailabilityZone: awssdk.String("us-west-2a")})
	g.Expect(err).NotTo(HaveOccurred())
	sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("lp-nodes"), Description: awssdk.String("nodes"), VpcId: vpc.Vpc.VpcId})
	g.Expect(err).NotTo(HaveOccurred())
	eksc := eks.NewFromConfig(environment.AWS)
	_, err = eksc.CreateCluster(ctx, &eks.CreateClusterInput{Name: awssdk.String(lpMotoCluster), RoleArn: awssdk.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{awssdk.ToString(sn.Subnet.SubnetId)}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = eksc.DeleteCluster(context.Background(), &eks.DeleteClusterInput{Name: awssdk.String(lpMotoCluster)})
	})
	return awssdk.ToString(sn.Subnet.SubnetId), awssdk.ToString(sg.GroupId)
}

// deleteAndWait deletes the group as admin and waits until its finalizer
// has cleaned up and it is gone.
func deleteAndWait(t *testing.T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := admin.Delete(ctx, ig); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting InstanceGroup %s/%s: %v", namespace, name, err)
		return
	}
	deadline := time.Now().Add(3 * harness.ConvergeTimeout)
	for time.Now().Before(deadline) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), ig); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("InstanceGroup %s/%s still exists %s after its deletion (finalizers %v, status %+v)", namespace, name, 3*harness.ConvergeTimeout, ig.Finalizers, ig.Status)
}

func tagOf(tags []ec2types.Tag, key string) string {
	for _, tg := range tags {
		if awssdk.ToString(tg.Key) == key {
			return awssdk.ToString(tg.Value)
		}
	}
	return ""
}
