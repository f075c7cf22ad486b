package aws

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// motoUnimplemented lists the operations of the narrow interfaces that moto
// 5.2.5 does not implement and test/env does not add (EKS access entries
// are test/env's motoeksaccess.py) (EKS answers 404 with an HTML page, the query
// protocols 500 NotImplementedError). MOTO.md documents the same; when moto
// changes, this test fails and both must be updated.
var motoUnimplemented = map[string]bool{
	"EC2API.DeleteLaunchTemplateVersions":     true,
	"AutoScalingAPI.DisableMetricsCollection": true,
	"EKSAPI.UpdateNodegroupVersion":           true,
	"EKSAPI.ListUpdates":                      true,
	"EKSAPI.DescribeUpdate":                   true,
}

// probe is one call of an interface method, valid against real AWS in the
// order the probes run.
type probe struct {
	op   string // "<Interface>.<Method>"
	call func(ctx context.Context) error
}

// support classifies a call's result: "ok", "error <Code>" when moto
// implements the operation but answered with an AWS error, or
// "unimplemented" when the answer is not an AWS error at all.
func support(err error) string {
	if err == nil {
		return "ok"
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() != "" {
		return "error " + apiErr.ErrorCode()
	}
	return "unimplemented"
}

// testMotoOperationSupport calls every method of the narrow interfaces
// once, with arguments AWS would accept, and checks which ones moto
// implements. It logs the result as the table MOTO.md starts from.
func testMotoOperationSupport(t *testing.T, cfg awssdk.Config) {
	cfg.RetryMaxAttempts = 1 // moto's 500 for unimplemented actions is retryable
	c := NewClients(cfg)
	eksFull, iamFull, sqsFull := eks.NewFromConfig(cfg), iam.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	s := func(v string) *string { return awssdk.String(v) }
	i32 := func(v int32) *int32 { return awssdk.Int32(v) }

	// State the probes hand on to later probes.
	var (
		ami, ltID, instanceID, roleARN, policyARN string
		queueURL, receipt                         string
		subnets                                   []string
	)
	const (
		lt      = "support-template"
		asg     = "support-group"
		role    = "support-role"
		profile = "support-profile"
		cluster = "support-cluster"
	)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["ec2.amazonaws.com","eks.amazonaws.com"]},"Action":"sts:AssumeRole"}]}`

	probes := []probe{
		{"STSAPI.GetCallerIdentity", func(ctx context.Context) error {
			_, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			return err
		}},
		{"SSMAPI.GetParameter", func(ctx context.Context) error {
			out, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: s("/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64")})
			if err == nil {
				ami = *out.Parameter.Value
			}
			return err
		}},
		{"EC2API.DescribeSubnets", func(ctx context.Context) error {
			out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: s("default-for-az"), Values: []string{"true"}}}})
			if err == nil {
				for _, sn := range out.Subnets {
					subnets = append(subnets, *sn.SubnetId)
				}
			}
			return err
		}},
		{"EC2API.DescribeSecurityGroups", func(ctx context.Context) error {
			_, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: s("group-name"), Values: []string{"default"}}}})
			return err
		}},
		{"EC2API.DescribeImages", func(ctx context.Context) error {
			_, err := c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}})
			return err
		}},
		{"EC2API.DescribeInstanceTypes", func(ctx context.Context) error {
			_, err := c.EC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceTypeM5Large}})
			return err
		}},
		{"EC2API.CreateLaunchTemplate", func(ctx context.Context) error {
			out, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: s(lt),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: s(ami), InstanceType: ec2types.InstanceTypeT3Medium}})
			if err == nil {
				ltID = *out.LaunchTemplate.LaunchTemplateId
			}
			return err
		}},
		{"EC2API.CreateLaunchTemplateVersion", func(ctx context.Context) error {
			_, err := c.EC2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: s(lt), SourceVersion: s("1"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeM5Large}})
			return err
		}},
		{"EC2API.ModifyLaunchTemplate", func(ctx context.Context) error {
			_, err := c.EC2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateName: s(lt), DefaultVersion: s("2")})
			return err
		}},
		{"EC2API.DescribeLaunchTemplates", func(ctx context.Context) error {
			_, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{lt}})
			return err
		}},
		{"EC2API.DescribeLaunchTemplateVersions", func(ctx context.Context) error {
			_, err := c.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: s(lt), Versions: []string{"$Latest", "$Default"}})
			return err
		}},
		{"EC2API.CreateTags", func(ctx context.Context) error {
			_, err := c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{ltID}, Tags: []ec2types.Tag{{Key: s("owner"), Value: s("instance-manager")}}})
			return err
		}},
		{"AutoScalingAPI.CreateAutoScalingGroup", func(ctx context.Context) error {
			_, err := c.AutoScaling.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: s(asg),
				LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: s(ltID), Version: s("$Latest")},
				MinSize:        i32(0), MaxSize: i32(4), DesiredCapacity: i32(1), VPCZoneIdentifier: s(strings.Join(subnets, ","))})
			return err
		}},
		{"AutoScalingAPI.DescribeAutoScalingGroups", func(ctx context.Context) error {
			out, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
			if err == nil && len(out.AutoScalingGroups) == 1 && len(out.AutoScalingGroups[0].Instances) > 0 {
				instanceID = *out.AutoScalingGroups[0].Instances[0].InstanceId
			}
			return err
		}},
		{"EC2API.DescribeInstances", func(ctx context.Context) error {
			_, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
			return err
		}},
		{"AutoScalingAPI.UpdateAutoScalingGroup", func(ctx context.Context) error {
			_, err := c.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: s(asg), MaxSize: i32(5)})
			return err
		}},
		{"AutoScalingAPI.SetDesiredCapacity", func(ctx context.Context) error {
			_, err := c.AutoScaling.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: s(asg), DesiredCapacity: i32(2)})
			return err
		}},
		{"AutoScalingAPI.TerminateInstanceInAutoScalingGroup", func(ctx context.Context) error {
			_, err := c.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: s(instanceID), ShouldDecrementDesiredCapacity: awssdk.Bool(false)})
			return err
		}},
		{"AutoScalingAPI.CreateOrUpdateTags", func(ctx context.Context) error {
			_, err := c.AutoScaling.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: []astypes.Tag{{ResourceId: s(asg), ResourceType: s("auto-scaling-group"), Key: s("k"), Value: s("v"), PropagateAtLaunch: awssdk.Bool(true)}}})
			return err
		}},
		{"AutoScalingAPI.DeleteTags", func(ctx context.Context) error {
			_, err := c.AutoScaling.DeleteTags(ctx, &autoscaling.DeleteTagsInput{Tags: []astypes.Tag{{ResourceId: s(asg), ResourceType: s("auto-scaling-group"), Key: s("k")}}})
			return err
		}},
		{"AutoScalingAPI.PutLifecycleHook", func(ctx context.Context) error {
			_, err := c.AutoScaling.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: s(asg), LifecycleHookName: s("launch"),
				LifecycleTransition: s("autoscaling:EC2_INSTANCE_LAUNCHING"), HeartbeatTimeout: i32(300), DefaultResult: s("CONTINUE")})
			return err
		}},
		{"AutoScalingAPI.DescribeLifecycleHooks", func(ctx context.Context) error {
			_, err := c.AutoScaling.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: s(asg)})
			return err
		}},
		{"AutoScalingAPI.DescribeScalingActivities", func(ctx context.Context) error {
			_, err := c.AutoScaling.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: s(asg), MaxRecords: i32(20)})
			return err
		}},
		{"AutoScalingAPI.RecordLifecycleActionHeartbeat", func(ctx context.Context) error {
			// A termination hook holds the next termination in
			// Terminating:Wait (test/env), which the heartbeat extends.
			if _, err := c.AutoScaling.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: s(asg), LifecycleHookName: s("drain"),
				LifecycleTransition: s("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: i32(300), DefaultResult: s("CONTINUE")}); err != nil {
				return fmt.Errorf("setup: PutLifecycleHook: %w", err)
			}
			out, err := c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
			if err != nil || len(out.AutoScalingGroups) != 1 || len(out.AutoScalingGroups[0].Instances) == 0 {
				return fmt.Errorf("setup: no instance in %s (%v)", asg, err)
			}
			instanceID = *out.AutoScalingGroups[0].Instances[0].InstanceId
			if _, err := c.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: s(instanceID),
				ShouldDecrementDesiredCapacity: awssdk.Bool(false)}); err != nil {
				return fmt.Errorf("setup: TerminateInstanceInAutoScalingGroup: %w", err)
			}
			_, err = c.AutoScaling.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: s(asg),
				LifecycleHookName: s("drain"), InstanceId: s(instanceID)})
			return err
		}},
		{"AutoScalingAPI.CompleteLifecycleAction", func(ctx context.Context) error {
			_, err := c.AutoScaling.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: s(asg),
				LifecycleHookName: s("drain"), InstanceId: s(instanceID), LifecycleActionResult: s("CONTINUE")})
			return err
		}},
		{"AutoScalingAPI.DeleteLifecycleHook", func(ctx context.Context) error {
			_, err := c.AutoScaling.DeleteLifecycleHook(ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: s(asg), LifecycleHookName: s("launch")})
			return err
		}},
		{"AutoScalingAPI.PutWarmPool", func(ctx context.Context) error {
			_, err := c.AutoScaling.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: s(asg), MinSize: i32(1), PoolState: astypes.WarmPoolStateStopped})
			return err
		}},
		{"AutoScalingAPI.DescribeWarmPool", func(ctx context.Context) error {
			_, err := c.AutoScaling.DescribeWarmPool(ctx, &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: s(asg)})
			return err
		}},
		{"AutoScalingAPI.DeleteWarmPool", func(ctx context.Context) error {
			_, err := c.AutoScaling.DeleteWarmPool(ctx, &autoscaling.DeleteWarmPoolInput{AutoScalingGroupName: s(asg), ForceDelete: awssdk.Bool(true)})
			return err
		}},
		{"AutoScalingAPI.EnableMetricsCollection", func(ctx context.Context) error {
			_, err := c.AutoScaling.EnableMetricsCollection(ctx, &autoscaling.EnableMetricsCollectionInput{AutoScalingGroupName: s(asg), Granularity: s("1Minute")})
			return err
		}},
		{"AutoScalingAPI.DisableMetricsCollection", func(ctx context.Context) error {
			_, err := c.AutoScaling.DisableMetricsCollection(ctx, &autoscaling.DisableMetricsCollectionInput{AutoScalingGroupName: s(asg)})
			return err
		}},
		{"AutoScalingAPI.SuspendProcesses", func(ctx context.Context) error {
			_, err := c.AutoScaling.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: s(asg), ScalingProcesses: []string{"AZRebalance"}})
			return err
		}},
		{"AutoScalingAPI.ResumeProcesses", func(ctx context.Context) error {
			_, err := c.AutoScaling.ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{AutoScalingGroupName: s(asg), ScalingProcesses: []string{"AZRebalance"}})
			return err
		}},
		{"AutoScalingAPI.DeleteAutoScalingGroup", func(ctx context.Context) error {
			_, err := c.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: s(asg), ForceDelete: awssdk.Bool(true)})
			return err
		}},
		{"EC2API.DeleteLaunchTemplateVersions", func(ctx context.Context) error {
			_, err := c.EC2.DeleteLaunchTemplateVersions(ctx, &ec2.DeleteLaunchTemplateVersionsInput{LaunchTemplateName: s(lt), Versions: []string{"1"}})
			return err
		}},
		{"EC2API.DeleteLaunchTemplate", func(ctx context.Context) error {
			_, err := c.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: s(lt)})
			return err
		}},

		{"IAMAPI.CreateRole", func(ctx context.Context) error {
			out, err := c.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: s(role), AssumeRolePolicyDocument: s(trust)})
			if err == nil {
				roleARN = *out.Role.Arn
			}
			return err
		}},
		{"IAMAPI.GetRole", func(ctx context.Context) error {
			_, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: s(role)})
			return err
		}},
		{"IAMAPI.TagRole", func(ctx context.Context) error {
			_, err := c.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: s(role), Tags: []iamtypes.Tag{{Key: s("owner"), Value: s("instance-manager")}}})
			return err
		}},
		{"IAMAPI.AttachRolePolicy", func(ctx context.Context) error {
			// A customer managed policy: moto knows AWS managed policies only
			// when started with MOTO_IAM_LOAD_MANAGED_POLICIES=true.
			p, err := iamFull.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: s("support-policy"),
				PolicyDocument: s(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}`)})
			if err != nil {
				return fmt.Errorf("set up CreatePolicy: %w", err)
			}
			policyARN = *p.Policy.Arn
			_, err = c.IAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: s(role), PolicyArn: s(policyARN)})
			return err
		}},
		{"IAMAPI.ListAttachedRolePolicies", func(ctx context.Context) error {
			_, err := c.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: s(role)})
			return err
		}},
		{"IAMAPI.CreateInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: s(profile)})
			return err
		}},
		{"IAMAPI.TagInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: s(profile), Tags: []iamtypes.Tag{{Key: s("owner"), Value: s("instance-manager")}}})
			return err
		}},
		{"IAMAPI.AddRoleToInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: s(profile), RoleName: s(role)})
			return err
		}},
		{"IAMAPI.GetInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: s(profile)})
			return err
		}},
		{"IAMAPI.ListInstanceProfilesForRole", func(ctx context.Context) error {
			_, err := c.IAM.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: s(role)})
			return err
		}},

		{"EKSAPI.DescribeCluster", func(ctx context.Context) error {
			_, err := eksFull.CreateCluster(ctx, &eks.CreateClusterInput{Name: s(cluster), RoleArn: s(roleARN), Version: s("1.31"),
				ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}})
			if err != nil {
				return fmt.Errorf("set up CreateCluster: %w", err)
			}
			_, err = c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: s(cluster)})
			return err
		}},
		{"EKSAPI.CreateAccessEntry", func(ctx context.Context) error {
			_, err := c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: s(cluster), PrincipalArn: s(roleARN), Type: s("EC2_LINUX")})
			return err
		}},
		{"EKSAPI.DescribeAccessEntry", func(ctx context.Context) error {
			_, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: s(cluster), PrincipalArn: s(roleARN)})
			return err
		}},
		{"EKSAPI.DeleteAccessEntry", func(ctx context.Context) error {
			_, err := c.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: s(cluster), PrincipalArn: s(roleARN)})
			return err
		}},
		{"EKSAPI.CreateNodegroup", func(ctx context.Context) error {
			_, err := c.EKS.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: s(cluster), NodegroupName: s("ng"), NodeRole: s(roleARN), Subnets: subnets,
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: i32(1), MaxSize: i32(3), DesiredSize: i32(1)}})
			return err
		}},
		{"EKSAPI.DescribeNodegroup", func(ctx context.Context) error {
			_, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: s(cluster), NodegroupName: s("ng")})
			return err
		}},
		{"EKSAPI.ListNodegroups", func(ctx context.Context) error {
			_, err := c.EKS.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: s(cluster)})
			return err
		}},
		{"EKSAPI.UpdateNodegroupConfig", func(ctx context.Context) error {
			_, err := c.EKS.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: s(cluster), NodegroupName: s("ng"),
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: i32(1), MaxSize: i32(3), DesiredSize: i32(2)}})
			return err
		}},
		{"EKSAPI.UpdateNodegroupVersion", func(ctx context.Context) error {
			_, err := c.EKS.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: s(cluster), NodegroupName: s("ng")})
			return err
		}},
		{"EKSAPI.ListUpdates", func(ctx context.Context) error {
			_, err := c.EKS.ListUpdates(ctx, &eks.ListUpdatesInput{Name: s(cluster), NodegroupName: s("ng")})
			return err
		}},
		{"EKSAPI.DescribeUpdate", func(ctx context.Context) error {
			_, err := c.EKS.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: s(cluster), NodegroupName: s("ng"), UpdateId: s("00000000-0000-0000-0000-000000000000")})
			return err
		}},
		{"EKSAPI.TagResource", func(ctx context.Context) error {
			out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: s(cluster), NodegroupName: s("ng")})
			if err != nil {
				return err
			}
			_, err = c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: out.Nodegroup.NodegroupArn, Tags: map[string]string{"team": "a"}})
			return err
		}},
		{"EKSAPI.UntagResource", func(ctx context.Context) error {
			out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: s(cluster), NodegroupName: s("ng")})
			if err != nil {
				return err
			}
			_, err = c.EKS.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: out.Nodegroup.NodegroupArn, TagKeys: []string{"team"}})
			return err
		}},
		{"EKSAPI.DeleteNodegroup", func(ctx context.Context) error {
			_, err := c.EKS.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: s(cluster), NodegroupName: s("ng")})
			return err
		}},
		{"EKSAPI.CreateFargateProfile", func(ctx context.Context) error {
			_, err := c.EKS.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{ClusterName: s(cluster), FargateProfileName: s("fp"), PodExecutionRoleArn: s(roleARN),
				Subnets: subnets, Selectors: []ekstypes.FargateProfileSelector{{Namespace: s("batch")}}})
			return err
		}},
		{"EKSAPI.DescribeFargateProfile", func(ctx context.Context) error {
			_, err := c.EKS.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: s(cluster), FargateProfileName: s("fp")})
			return err
		}},
		{"EKSAPI.ListFargateProfiles", func(ctx context.Context) error {
			_, err := c.EKS.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: s(cluster)})
			return err
		}},
		{"EKSAPI.DeleteFargateProfile", func(ctx context.Context) error {
			_, err := c.EKS.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: s(cluster), FargateProfileName: s("fp")})
			return err
		}},

		// IAM teardown last: the cluster and node group used the role.
		{"IAMAPI.RemoveRoleFromInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: s(profile), RoleName: s(role)})
			return err
		}},
		{"IAMAPI.DeleteInstanceProfile", func(ctx context.Context) error {
			_, err := c.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: s(profile)})
			return err
		}},
		{"IAMAPI.DetachRolePolicy", func(ctx context.Context) error {
			_, err := c.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: s(role), PolicyArn: s(policyARN)})
			return err
		}},
		{"IAMAPI.DeleteRole", func(ctx context.Context) error {
			_, err := c.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: s(role)})
			return err
		}},
		// The interruption queue: the admin creates it and EventBridge
		// sends to it (here, the full client).
		{"SQSAPI.GetQueueAttributes", func(ctx context.Context) error {
			out, err := sqsFull.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: s("support-queue")})
			if err != nil {
				return err
			}
			queueURL = *out.QueueUrl
			if _, err := sqsFull.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: s(queueURL), MessageBody: s(`{"detail-type":"EC2 Spot Instance Interruption Warning"}`)}); err != nil {
				return err
			}
			_, err = c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: s(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
			return err
		}},
		{"SQSAPI.ReceiveMessage", func(ctx context.Context) error {
			out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: s(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err == nil && len(out.Messages) > 0 {
				receipt = *out.Messages[0].ReceiptHandle
			}
			return err
		}},
		{"SQSAPI.DeleteMessage", func(ctx context.Context) error {
			_, err := c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: s(queueURL), ReceiptHandle: s(receipt)})
			return err
		}},
	}

	probed := map[string]bool{}
	var table strings.Builder
	table.WriteString("\n| operation | moto 5.2.5 |\n| --- | --- |\n")
	for _, p := range probes {
		probed[p.op] = true
		err := p.call(t.Context())
		got := support(err)
		want := "ok"
		if motoUnimplemented[p.op] {
			want = "unimplemented"
		}
		fmt.Fprintf(&table, "| %s | %s |\n", p.op, got)
		if got != want {
			t.Errorf("%s: moto answered %q (%v), MOTO.md says %q", p.op, got, err, want)
		}
	}
	t.Log(table.String())

	// Every method of every narrow interface is probed, so MOTO.md stays
	// complete when an interface grows.
	for _, iface := range []reflect.Type{
		reflect.TypeFor[EC2API](), reflect.TypeFor[AutoScalingAPI](), reflect.TypeFor[IAMAPI](),
		reflect.TypeFor[EKSAPI](), reflect.TypeFor[SSMAPI](), reflect.TypeFor[STSAPI](), reflect.TypeFor[SQSAPI](),
	} {
		for m := range iface.Methods() {
			if op := iface.Name() + "." + m.Name; !probed[op] {
				t.Errorf("%s is not probed against moto", op)
			}
		}
	}
}
