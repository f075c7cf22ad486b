package aws

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/test/env"
)

// TestMoto runs the tests that need AWS against the local environment's
// moto (skipped without IM_ENV_BIN_DIR). One moto serves every subtest; each
// starts from a reset moto. Every Auto Scaling behaviour of test/env is on
// unless IM_MOTO_AUTOSCALING says otherwise (=none: moto alone, which the
// AutoScalingContract subtests fail against).
func TestMoto(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true, MotoAutoScaling: cmp.Or(os.Getenv(env.MotoAutoScalingEnv), "all")})
	for _, tc := range []struct {
		name string
		run  func(*testing.T, awssdk.Config)
	}{
		{"ScalingGroupCache", testScalingGroupCacheAgainstMoto},
		{"ScalingGroupCachePagination", testScalingGroupCachePaginationAgainstMoto},
		{"OperationSupport", testMotoOperationSupport},
		{"Behaviour", testMotoBehaviour},
		{"SSMContract", testSSMContract},
		{"AutoScalingContract", func(t *testing.T, cfg awssdk.Config) { testAutoScalingContract(t, cfg, e) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.ResetAWS(t.Context()); err != nil {
				t.Fatalf("reset moto: %v", err)
			}
			cfg := e.AWS.Copy()
			Instrument(&cfg)
			tc.run(t, cfg)
		})
	}
}

// countingAutoScaling counts DescribeAutoScalingGroups calls made through it.
type countingAutoScaling struct {
	AutoScalingAPI
	mu        sync.Mutex
	describes int
}

func (c *countingAutoScaling) DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	c.mu.Lock()
	c.describes++
	c.mu.Unlock()
	return c.AutoScalingAPI.DescribeAutoScalingGroups(ctx, in, optFns...)
}

func (c *countingAutoScaling) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.describes
}

// motoFixture creates what most moto tests need: a launch template with two
// versions (t3.medium, then m5.large) from an AMI moto knows.
type motoFixture struct {
	template string
	subnets  string // VPCZoneIdentifier: two default subnets
}

func newMotoFixture(t *testing.T, c *Clients, template string) motoFixture {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	// moto ships the public Amazon Linux parameters (not the EKS ones) and
	// their AMIs.
	param, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String("/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: awssdk.String(template),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:      param.Parameter.Value,
			InstanceType: ec2types.InstanceTypeT3Medium,
			UserData:     awssdk.String(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho v1\n"))),
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.EC2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateName: awssdk.String(template),
		SourceVersion:      awssdk.String("1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeM5Large},
	})
	g.Expect(err).NotTo(HaveOccurred())
	subnets, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(subnets.Subnets)).To(BeNumerically(">=", 2))
	return motoFixture{template: template, subnets: *subnets.Subnets[0].SubnetId + "," + *subnets.Subnets[1].SubnetId}
}

// createGroup creates an Auto Scaling group from the fixture's template at
// version, with the given tags (propagated at launch).
func (f motoFixture) createGroup(t *testing.T, c *Clients, name, version string, desired int32, tags map[string]string) {
	t.Helper()
	in := &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: awssdk.String(name),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(f.template), Version: awssdk.String(version)},
		MinSize:              awssdk.Int32(0),
		MaxSize:              awssdk.Int32(5),
		DesiredCapacity:      awssdk.Int32(desired),
		VPCZoneIdentifier:    awssdk.String(f.subnets),
	}
	for k, v := range tags {
		in.Tags = append(in.Tags, astypes.Tag{Key: awssdk.String(k), Value: awssdk.String(v), PropagateAtLaunch: awssdk.Bool(true)})
	}
	_, err := c.AutoScaling.CreateAutoScalingGroup(t.Context(), in)
	if err != nil && isAlreadyExists(err) && createdAsAsked(t, c, in) {
		// CreateAutoScalingGroup takes no idempotency token: a create whose
		// answer was lost (a reset connection, a server error) and that the
		// SDK retried meets the group its first attempt made. moto was reset
		// before this subtest, so a group with this name, template and tags
		// is that attempt's (the environment logs the lost answer).
		t.Logf("CreateAutoScalingGroup %s: AlreadyExists after a retry; the group is the one asked for", name)
		err = nil
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "CreateAutoScalingGroup %s", name)
}

func isAlreadyExists(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "AlreadyExists"
}

// createdAsAsked reports whether the Auto Scaling group in.AutoScalingGroupName
// exists with in's launch template, version, sizes and tags.
func createdAsAsked(t *testing.T, c *Clients, in *autoscaling.CreateAutoScalingGroupInput) bool {
	out, err := c.AutoScaling.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{*in.AutoScalingGroupName}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		return false
	}
	got := out.AutoScalingGroups[0]
	if got.LaunchTemplate == nil || awssdk.ToString(got.LaunchTemplate.LaunchTemplateName) != awssdk.ToString(in.LaunchTemplate.LaunchTemplateName) ||
		awssdk.ToString(got.LaunchTemplate.Version) != awssdk.ToString(in.LaunchTemplate.Version) ||
		awssdk.ToInt32(got.MinSize) != awssdk.ToInt32(in.MinSize) || awssdk.ToInt32(got.MaxSize) != awssdk.ToInt32(in.MaxSize) {
		return false
	}
	tags := map[string]string{}
	for _, tag := range got.Tags {
		tags[awssdk.ToString(tag.Key)] = awssdk.ToString(tag.Value)
	}
	for _, tag := range in.Tags {
		if v, ok := tags[awssdk.ToString(tag.Key)]; !ok || v != awssdk.ToString(tag.Value) {
			return false
		}
	}
	return true
}

func testScalingGroupCacheAgainstMoto(t *testing.T, cfg awssdk.Config) {
	c := NewClients(cfg)
	g := NewWithT(t)
	ctx := t.Context()
	const cluster = "moto-cluster"
	f := newMotoFixture(t, c, "ig-template")
	f.createGroup(t, c, "ig-a", "$Latest", 1, map[string]string{ClusterTagKey(cluster): "owned"})
	f.createGroup(t, c, "ig-b", "$Default", 2, map[string]string{ClusterTagKey(cluster): "owned"})
	f.createGroup(t, c, "foreign", "1", 1, map[string]string{ClusterTagKey("other"): "owned"})
	f.createGroup(t, c, "untagged", "1", 1, nil)

	api := &countingAutoScaling{AutoScalingAPI: c.AutoScaling}
	cache := NewScalingGroupCache(api, cluster, time.Hour)
	d := snapshot(t, "Auto Scaling", "DescribeAutoScalingGroups")

	all, err := cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(all)).To(Equal([]string{"ig-a", "ig-b"}))
	for name, desired := range map[string]int32{"ig-a": 1, "ig-b": 2} {
		got, ok, err := cache.Get(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(*got.DesiredCapacity).To(Equal(desired))
		g.Expect(got.Instances).To(HaveLen(int(desired)), "moto launches the group's instances")
	}
	for _, name := range []string{"foreign", "untagged"} {
		_, ok, err := cache.Get(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse(), name)
	}
	g.Expect(api.count()).To(Equal(1), "every read served by one DescribeAutoScalingGroups call")
	calls, _ := d.since()
	g.Expect(calls[OutcomeSuccess]).To(Equal(1.0), "the call is counted in the metrics")

	// A change is not seen until the writer invalidates.
	_, err = c.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String("ig-a"), DesiredCapacity: awssdk.Int32(3)})
	g.Expect(err).NotTo(HaveOccurred())
	f.createGroup(t, c, "ig-c", "$Latest", 0, map[string]string{ClusterTagKey(cluster): "owned"})
	stale, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*stale.DesiredCapacity).To(Equal(int32(1)))

	cache.Invalidate()
	fresh, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*fresh.DesiredCapacity).To(Equal(int32(3)))
	g.Expect(fresh.Instances).To(HaveLen(3))
	all, err = cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(all)).To(Equal([]string{"ig-a", "ig-b", "ig-c"}))
	g.Expect(api.count()).To(Equal(2))
}

// Pagination through moto's real NextToken: more tagged groups than fit in
// one page of 100.
func testScalingGroupCachePaginationAgainstMoto(t *testing.T, cfg awssdk.Config) {
	c := NewClients(cfg)
	g := NewWithT(t)
	const cluster = "big-cluster"
	f := newMotoFixture(t, c, "ig-template")
	want := make([]string, 0, 105)
	for i := range 105 {
		name := "ig-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		f.createGroup(t, c, name, "$Latest", 0, map[string]string{ClusterTagKey(cluster): "owned"})
		want = append(want, name)
	}
	api := &countingAutoScaling{AutoScalingAPI: c.AutoScaling}
	all, err := NewScalingGroupCache(api, cluster, time.Hour).List(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(all)).To(Equal(want))
	g.Expect(api.count()).To(Equal(2))
}
