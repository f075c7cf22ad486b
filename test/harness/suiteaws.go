package harness

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// ASGTags reads the Auto Scaling group name: its tags by key and the group,
// nil and nil when it does not exist.
func (s *Suite) ASGTags(t testing.TB, name string) (map[string]string, *astypes.AutoScalingGroup) {
	t.Helper()
	out, err := autoscaling.NewFromConfig(s.Env.AWS).DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups %s: %v", name, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, nil
	}
	tags := map[string]string{}
	for _, tg := range out.AutoScalingGroups[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return tags, &out.AutoScalingGroups[0]
}

// NothingInAWS checks that the group's Auto Scaling group (with its warm
// pool), launch template, role and instance profile are gone.
func (s *Suite) NothingInAWS(t testing.TB, namespace, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	asgName := ownership.Name(ownership.LimitLaunchTemplate, s.Cloud.Cluster, namespace, name)
	roleName := ownership.Name(ownership.LimitIAMRole, s.Cloud.Cluster, namespace, name)
	out, err := autoscaling.NewFromConfig(s.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(BeEmpty(), "Auto Scaling group %s is deleted", asgName)
	_, err = ec2.NewFromConfig(s.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{asgName}})
	g.Expect(err).To(HaveOccurred(), "launch template %s is deleted", asgName)
	_, err = iam.NewFromConfig(s.Env.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")), "role %s is deleted", roleName)
	_, err = iam.NewFromConfig(s.Env.AWS).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")), "instance profile %s is deleted", roleName)
}
