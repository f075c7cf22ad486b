package aws

import (
	"errors"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"
)

// testMotoBehaviour pins down how faithfully moto 5.2.5 emulates the calls
// the provisioners depend on, as MOTO.md describes. Where moto differs from
// AWS the assertion states moto's behaviour and the comment AWS's: a failure
// here means moto changed and MOTO.md needs the same change.
func testMotoBehaviour(t *testing.T, cfg awssdk.Config) {
	c := NewClients(cfg)
	f := newMotoFixture(t, c, "behaviour-template") // v1 t3.medium (default), v2 m5.large

	describeGroup := func(t *testing.T, name string) astypes.AutoScalingGroup {
		t.Helper()
		out, err := c.AutoScaling.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out.AutoScalingGroups[0]
	}
	instance := func(t *testing.T, id string) ec2types.Instance {
		t.Helper()
		out, err := c.EC2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return out.Reservations[0].Instances[0]
	}
	ids := func(g astypes.AutoScalingGroup) []string {
		var out []string
		for _, i := range g.Instances {
			out = append(out, *i.InstanceId)
		}
		return out
	}
	apiCode := func(err error) string {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) {
			return apiErr.ErrorCode()
		}
		return ""
	}

	// AWS: CreateTags "adds or overwrites only the specified tags for the
	// specified Amazon EC2 resource" (EC2 API Reference, CreateTags), and
	// DescribeLaunchTemplates shows them; moto 5.2.5 alone answers with
	// the creation-time tags (test/env's motoserver.py reads them afresh).
	t.Run("CreateTags on a launch template shows in DescribeLaunchTemplates", func(t *testing.T) {
		g := NewWithT(t)
		lts, err := c.EC2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"behaviour-template"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lts.LaunchTemplates).To(HaveLen(1))
		_, err = c.EC2.CreateTags(t.Context(), &ec2.CreateTagsInput{Resources: []string{*lts.LaunchTemplates[0].LaunchTemplateId},
			Tags: []ec2types.Tag{{Key: awssdk.String("retagged"), Value: awssdk.String("yes")}}})
		g.Expect(err).NotTo(HaveOccurred())
		lts, err = c.EC2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"behaviour-template"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lts.LaunchTemplates[0].Tags).To(ContainElement(ec2types.Tag{Key: awssdk.String("retagged"), Value: awssdk.String("yes")}))
	})

	t.Run("tag filters of DescribeAutoScalingGroups", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "filter-a", "1", 0, map[string]string{"team": "a"})
		f.createGroup(t, c, "filter-b", "1", 0, map[string]string{"team": "b"})
		for _, tc := range []struct {
			filter astypes.Filter
			want   []string
		}{
			{astypes.Filter{Name: awssdk.String("tag-key"), Values: []string{"team"}}, []string{"filter-a", "filter-b"}},
			{astypes.Filter{Name: awssdk.String("tag-value"), Values: []string{"b"}}, []string{"filter-b"}},
			{astypes.Filter{Name: awssdk.String("tag:team"), Values: []string{"a"}}, []string{"filter-a"}},
		} {
			out, err := c.AutoScaling.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{Filters: []astypes.Filter{tc.filter}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(out.AutoScalingGroups)).To(Equal(tc.want), *tc.filter.Name)
		}
	})

	t.Run("instances launch from the group's version but report the template's default", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "latest", "$Latest", 1, nil)
		grp := describeGroup(t, "latest")
		g.Expect(grp.Instances).To(HaveLen(1))
		// Launched from $Latest = version 2 (m5.large) ...
		g.Expect(instance(t, *grp.Instances[0].InstanceId).InstanceType).To(Equal(ec2types.InstanceTypeM5Large))
		// ... but reported as the template's default version (AWS: "2").
		g.Expect(*grp.Instances[0].LaunchTemplate.Version).To(Equal("1"))

		_, err := c.EC2.ModifyLaunchTemplate(t.Context(), &ec2.ModifyLaunchTemplateInput{LaunchTemplateName: awssdk.String(f.template), DefaultVersion: awssdk.String("2")})
		g.Expect(err).NotTo(HaveOccurred())
		// The report follows the default even for instances already running.
		g.Expect(*describeGroup(t, "latest").Instances[0].LaunchTemplate.Version).To(Equal("2"))
		_, err = c.EC2.ModifyLaunchTemplate(t.Context(), &ec2.ModifyLaunchTemplateInput{LaunchTemplateName: awssdk.String(f.template), DefaultVersion: awssdk.String("1")})
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("terminate without decrement replaces the instance", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "replace", "1", 2, nil)
		before := ids(describeGroup(t, "replace"))
		_, err := c.AutoScaling.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: awssdk.String(before[0]), ShouldDecrementDesiredCapacity: awssdk.Bool(false)})
		g.Expect(err).NotTo(HaveOccurred())
		after := describeGroup(t, "replace")
		g.Expect(*after.DesiredCapacity).To(Equal(int32(2)))
		g.Expect(ids(after)).To(HaveLen(2))
		g.Expect(ids(after)).NotTo(ContainElement(before[0]))
		g.Expect(instance(t, before[0]).State.Name).To(Equal(ec2types.InstanceStateNameTerminated))

		_, err = c.AutoScaling.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: awssdk.String(ids(after)[0]), ShouldDecrementDesiredCapacity: awssdk.Bool(true)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(*describeGroup(t, "replace").DesiredCapacity).To(Equal(int32(1)))
	})

	t.Run("SetDesiredCapacity is not checked against MaxSize", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "over-max", "1", 0, nil) // MaxSize 5
		_, err := c.AutoScaling.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("over-max"), DesiredCapacity: awssdk.Int32(6)})
		g.Expect(err).NotTo(HaveOccurred()) // AWS: ValidationError
		g.Expect(describeGroup(t, "over-max").Instances).To(HaveLen(6))
	})

	t.Run("suspended Launch still launches", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "suspended", "1", 0, nil)
		_, err := c.AutoScaling.SuspendProcesses(t.Context(), &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String("suspended"), ScalingProcesses: []string{"Launch"}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.AutoScaling.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("suspended"), DesiredCapacity: awssdk.Int32(2)})
		g.Expect(err).NotTo(HaveOccurred())
		grp := describeGroup(t, "suspended")
		g.Expect(grp.SuspendedProcesses).To(HaveLen(1))
		g.Expect(grp.Instances).To(HaveLen(2)) // AWS: none until Launch resumes
	})

	t.Run("duplicate CreateAutoScalingGroup answers AlreadyExists (test/env/motoserver.py)", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "twice", "1", 1, map[string]string{"first": "yes"})
		first := ids(describeGroup(t, "twice"))
		_, err := c.AutoScaling.CreateAutoScalingGroup(t.Context(), &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: awssdk.String("twice"), MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(1),
			LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(f.template), Version: awssdk.String("1")},
			VPCZoneIdentifier: awssdk.String(f.subnets),
		})
		var ae smithy.APIError
		g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
		g.Expect(ae.ErrorCode()).To(Equal("AlreadyExists")) // moto 5.2.5 alone replaces the group
		grp := describeGroup(t, "twice")
		g.Expect(grp.Tags).NotTo(BeEmpty(), "the first group is kept")
		g.Expect(ids(grp)).To(Equal(first))
	})

	t.Run("a call repeated after its answer was lost gets AWS's 4xx (test/env/motoserver.py)", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "repeat", "1", 1, nil)
		id := ids(describeGroup(t, "repeat"))[0]
		terminate := func() error {
			_, err := c.AutoScaling.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
				InstanceId: awssdk.String(id), ShouldDecrementDesiredCapacity: awssdk.Bool(true)})
			return err
		}
		g.Expect(terminate()).To(Succeed())
		g.Expect(apiCode(terminate())).To(Equal("ValidationError")) // moto 5.2.5 alone: 500

		_, err := c.IAM.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: awssdk.String("repeat"), AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.IAM.CreateInstanceProfile(t.Context(), &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String("repeat")})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.IAM.AddRoleToInstanceProfile(t.Context(), &iam.AddRoleToInstanceProfileInput{InstanceProfileName: awssdk.String("repeat"), RoleName: awssdk.String("repeat")})
		g.Expect(err).NotTo(HaveOccurred())
		remove := func() error {
			_, err := c.IAM.RemoveRoleFromInstanceProfile(t.Context(), &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: awssdk.String("repeat"), RoleName: awssdk.String("repeat")})
			return err
		}
		g.Expect(remove()).To(Succeed())
		g.Expect(apiCode(remove())).To(Equal("NoSuchEntity")) // moto 5.2.5 alone: 500
	})

	t.Run("DeleteAutoScalingGroup terminates instances without ForceDelete", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "doomed", "1", 1, nil)
		id := ids(describeGroup(t, "doomed"))[0]
		_, err := c.AutoScaling.DeleteAutoScalingGroup(t.Context(), &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: awssdk.String("doomed")})
		g.Expect(err).NotTo(HaveOccurred()) // AWS: ResourceInUse while instances remain
		g.Expect(instance(t, id).State.Name).To(Equal(ec2types.InstanceStateNameTerminated))
		out, err := c.AutoScaling.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"doomed"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(BeEmpty(), "gone at once (AWS: Status \"Delete in progress\" first)")
	})

	t.Run("instances: region-less private DNS, no instance profile", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.EC2.CreateLaunchTemplateVersion(t.Context(), &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: awssdk.String(f.template), SourceVersion: awssdk.String("1"),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: awssdk.String("no-such-profile")}}})
		g.Expect(err).NotTo(HaveOccurred()) // AWS validates the profile at launch
		f.createGroup(t, c, "spread", "$Latest", 3, nil)
		for _, id := range ids(describeGroup(t, "spread")) {
			i := instance(t, id)
			g.Expect(*i.PrivateDnsName).To(MatchRegexp(`^ip-\d+-\d+-\d+-\d+\.ec2\.internal$`)) // AWS in us-west-2: ip-….us-west-2.compute.internal
			g.Expect(i.IamInstanceProfile).To(BeNil())
			g.Expect(i.Tags).To(ContainElement(ec2types.Tag{Key: awssdk.String("aws:autoscaling:groupName"), Value: awssdk.String("spread")}))
		}
	})

	t.Run("SSM has no Bottlerocket parameters (the Amazon Linux EKS ones are test/env's: SSMContract)", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.SSM.GetParameter(t.Context(), &ssm.GetParameterInput{Name: awssdk.String("/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id")})
		g.Expect(apiCode(err)).To(Equal("ParameterNotFound"))
	})

	t.Run("EKS: cluster and node group are ACTIVE at once; the node group has no Auto Scaling group", func(t *testing.T) {
		g := NewWithT(t)
		role, err := c.IAM.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: awssdk.String("eks-behaviour"), AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		subnets := strings.Split(f.subnets, ",")
		_, err = eks.NewFromConfig(cfg).CreateCluster(t.Context(), &eks.CreateClusterInput{Name: awssdk.String("behaviour"), RoleArn: role.Role.Arn, Version: awssdk.String("1.31"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets},
			AccessConfig:       &ekstypes.CreateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeApi}})
		g.Expect(err).NotTo(HaveOccurred())
		cl, err := c.EKS.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: awssdk.String("behaviour")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.Cluster.Status).To(Equal(ekstypes.ClusterStatusActive))                            // AWS: CREATING for ~10 minutes
		g.Expect(cl.Cluster.AccessConfig.AuthenticationMode).To(Equal(ekstypes.AuthenticationModeApi)) // as AWS, only because test/env's motoeksaccess.py keeps it
		g.Expect(cl.Cluster.ResourcesVpcConfig.ClusterSecurityGroupId).To(BeNil())
		g.Expect(*cl.Cluster.Endpoint).To(HavePrefix("https://"))

		ng, err := c.EKS.CreateNodegroup(t.Context(), &eks.CreateNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("ng"), NodeRole: role.Role.Arn, Subnets: subnets,
			ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(3), DesiredSize: awssdk.Int32(2)}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ng.Nodegroup.Status).To(Equal(ekstypes.NodegroupStatusActive)) // AWS: CREATING
		g.Expect(*ng.Nodegroup.Version).To(Equal("1.19"))                       // AWS: the cluster's 1.31
		g.Expect(ng.Nodegroup.Resources.AutoScalingGroups).To(HaveLen(1))
		asgName := *ng.Nodegroup.Resources.AutoScalingGroups[0].Name
		out, err := c.AutoScaling.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(BeEmpty()) // AWS: the group with the nodes

		// Node group tags change in place, as on AWS, only because
		// motoserver.py finds node groups by ARN (moto alone: clusters only).
		arn := ng.Nodegroup.NodegroupArn
		_, err = c.EKS.TagResource(t.Context(), &eks.TagResourceInput{ResourceArn: arn, Tags: map[string]string{"a": "1", "b": "2", "c": "3"}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.EKS.UntagResource(t.Context(), &eks.UntagResourceInput{ResourceArn: arn, TagKeys: []string{"a", "b"}})
		g.Expect(err).NotTo(HaveOccurred())
		tagged, err := c.EKS.DescribeNodegroup(t.Context(), &eks.DescribeNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("ng")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tagged.Nodegroup.Tags).To(Equal(map[string]string{"c": "3"}))

		_, err = c.EKS.DeleteNodegroup(t.Context(), &eks.DeleteNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("ng")})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.EKS.DescribeNodegroup(t.Context(), &eks.DescribeNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("ng")})
		g.Expect(apiCode(err)).To(Equal("ResourceNotFoundException")) // AWS: DELETING first

		// AWS leaves a node group whose instances cannot launch in
		// CREATE_FAILED with a health issue and never retries it ("Managed
		// node group errors", EKS User Guide, "Troubleshoot problems with
		// Amazon EKS clusters and nodes"); moto never fails a creation:
		// motoserver.py does it for a node group tagged
		// emulator.instancemgr/create-failures=N, its first N creations.
		create := func() *ekstypes.Nodegroup {
			out, err := c.EKS.CreateNodegroup(t.Context(), &eks.CreateNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("failing"),
				NodeRole: role.Role.Arn, Subnets: subnets, Tags: map[string]string{"emulator.instancemgr/create-failures": "1"}})
			g.Expect(err).NotTo(HaveOccurred())
			return out.Nodegroup
		}
		failed := create()
		g.Expect(failed.Status).To(Equal(ekstypes.NodegroupStatusCreateFailed))
		g.Expect(failed.Health.Issues).To(HaveLen(1))
		g.Expect(failed.Health.Issues[0].Code).To(Equal(ekstypes.NodegroupIssueCodeAsgInstanceLaunchFailures))
		_, err = c.EKS.DeleteNodegroup(t.Context(), &eks.DeleteNodegroupInput{ClusterName: awssdk.String("behaviour"), NodegroupName: awssdk.String("failing")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(create().Status).To(Equal(ekstypes.NodegroupStatusActive), "the second creation succeeds")
	})

	t.Run("IAM: AWS managed policies exist because test/env sets MOTO_IAM_LOAD_MANAGED_POLICIES", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.IAM.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: awssdk.String("node-role"), AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		for _, policy := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"} {
			_, err := c.IAM.AttachRolePolicy(t.Context(), &iam.AttachRolePolicyInput{RoleName: awssdk.String("node-role"), PolicyArn: awssdk.String("arn:aws:iam::aws:policy/" + policy)})
			g.Expect(err).NotTo(HaveOccurred(), "without that variable moto answers NoSuchEntity")
		}
		_, err = c.IAM.DeleteRole(t.Context(), &iam.DeleteRoleInput{RoleName: awssdk.String("node-role")})
		g.Expect(apiCode(err)).To(Equal("DeleteConflict"), "policies still attached")
	})
}
