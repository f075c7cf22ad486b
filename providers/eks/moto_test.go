package eks

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/reads"
	"github.com/instancemgr/instance-manager/test/env"
)

// TestMoto runs the provisioner against the local environment's moto
// (skipped without IM_ENV_BIN_DIR), counting its AWS calls with the
// provider's own metrics. Each subtest starts from a reset moto.
func TestMoto(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	for _, tc := range []struct {
		name string
		run  func(*testing.T, awssdk.Config)
	}{
		{"IdleGroupMakesNoCalls", testIdleGroupMakesNoCalls},
		{"OutOfBandChangesAreNoticedFromTheListing", testOutOfBandChangesAreNoticed},
		{"ASubnetSwapInTheSameZoneDrifts", testSubnetSwapDrifts},
		{"InsufficientCapacityIsReadFromTheFailedScalingActivity", func(t *testing.T, cfg awssdk.Config) { testLaunchFailureIsReported(t, cfg, e) }},
		{"AStaleAccessEntryIsReplacedAndTheGCDeletesItWithTheRole", func(t *testing.T, cfg awssdk.Config) { testAccessEntryLifecycle(t, cfg, e) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.ResetAWS(t.Context()); err != nil {
				t.Fatalf("reset moto: %v", err)
			}
			cfg := e.AWS.Copy()
			awsp.Instrument(&cfg)
			tc.run(t, cfg)
		})
	}
}

// motoWorld is a cluster with two default subnets, the default security
// group and two AMIs.
type motoWorld struct {
	subnets []string
	sg      string
	amis    []string
}

func newMotoWorld(t *testing.T, cfg awssdk.Config) motoWorld {
	t.Helper()
	return newMotoWorldMode(t, cfg, "")
}

// newMotoWorldMode is newMotoWorld with the cluster's authentication mode
// (empty: EKS's default, CONFIG_MAP; kept by test/env's motoeksaccess.py).
func newMotoWorldMode(t *testing.T, cfg awssdk.Config, mode ekstypes.AuthenticationMode) motoWorld {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ec2c := ec2.NewFromConfig(cfg)
	var w motoWorld
	sn, err := ec2c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: awssdk.String("default-for-az"), Values: []string{"true"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range sn.Subnets {
		w.subnets = append(w.subnets, awssdk.ToString(s.SubnetId))
	}
	sort.Strings(w.subnets)
	g.Expect(len(w.subnets)).To(BeNumerically(">=", 2))
	w.subnets = w.subnets[:2]
	sgs, err := ec2c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: awssdk.String("group-name"), Values: []string{"default"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sgs.SecurityGroups).NotTo(BeEmpty())
	w.sg = awssdk.ToString(sgs.SecurityGroups[0].GroupId)
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: awssdk.String("architecture"), Values: []string{"x86_64"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, im := range images.Images {
		w.amis = append(w.amis, awssdk.ToString(im.ImageId))
	}
	sort.Strings(w.amis)
	g.Expect(len(w.amis)).To(BeNumerically(">=", 2))
	in := &eks.CreateClusterInput{
		Name: awssdk.String("prod"), RoleArn: awssdk.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: w.subnets},
	}
	if mode != "" {
		in.AccessConfig = &ekstypes.CreateAccessConfigRequest{AuthenticationMode: mode}
	}
	_, err = eks.NewFromConfig(cfg).CreateCluster(ctx, in)
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

func (w motoWorld) group() *v1alpha1.InstanceGroup {
	ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "t3.medium", Image: w.amis[0], Subnets: w.subnets, SecurityGroups: []string{w.sg}})
	ig.UID, ig.Generation = "uid-web", 1
	return ig
}

// settle makes ig look Ready for its current spec, as the reconciler
// stores it.
func settle(ig *v1alpha1.InstanceGroup, obs *providers.Observation) {
	ig.Status.CurrentState, ig.Status.ObservedGeneration = v1alpha1.StateReady, ig.Generation
	ig.Status.ActiveScalingGroupName = obs.GroupName
}

func mustApply(t *testing.T, p *Provisioner, ig *v1alpha1.InstanceGroup) *providers.Observation {
	t.Helper()
	obs, err := p.Apply(t.Context(), ig)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return obs
}

// apiModeEKS serves DescribeCluster from moto with the authentication mode
// set to API and counts the access entries asked for (moto has none).
type apiModeEKS struct {
	awsp.EKSAPI
	entries *fakeAccessEntries
	creates int
}

func (a *apiModeEKS) DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, opts ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	out, err := a.EKSAPI.DescribeCluster(ctx, in, opts...)
	if err == nil {
		out.Cluster.AccessConfig = &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApi}
	}
	return out, err
}

func (a *apiModeEKS) CreateAccessEntry(ctx context.Context, in *eks.CreateAccessEntryInput, opts ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error) {
	a.creates++
	return a.entries.CreateAccessEntry(ctx, in, opts...)
}

// DescribeAccessEntry and DeleteAccessEntry are the fake's too: a second
// CreateAccessEntry (after the cloud resync period) is answered
// ResourceInUse, and the entry is then read to see whether it is stale.
func (a *apiModeEKS) DescribeAccessEntry(ctx context.Context, in *eks.DescribeAccessEntryInput, opts ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error) {
	return a.entries.DescribeAccessEntry(ctx, in, opts...)
}

func (a *apiModeEKS) DeleteAccessEntry(ctx context.Context, in *eks.DeleteAccessEntryInput, opts ...func(*eks.Options)) (*eks.DeleteAccessEntryOutput, error) {
	return a.entries.DeleteAccessEntry(ctx, in, opts...)
}

// A Ready group whose spec and Auto Scaling group do not change makes no
// AWS call of its own, in API authentication mode too; a spec change
// writes what changed without reading IAM, subnets or security groups
// again; after the cloud resync period everything is read again.
func testIdleGroupMakesNoCalls(t *testing.T, cfg awssdk.Config) {
	g := NewWithT(t)
	w := newMotoWorld(t, cfg)
	clients := awsp.NewClients(cfg)
	access := &apiModeEKS{EKSAPI: clients.EKS, entries: &fakeAccessEntries{entries: map[string]string{}}}
	clients.EKS = access
	p := New(clients, fake.NewClientBuilder().WithScheme(scheme(t)).Build(), Options{})
	ig := w.group()

	created := awsp.CallCounts()
	obs := mustApply(t, p, ig)
	t.Logf("AWS calls to create the group: %v", awsp.CallCounts().Since(created))
	g.Expect(obs.Instances).To(HaveLen(1))
	settle(ig, obs)
	mustApply(t, p, ig) // the launch versions of its instance are read once

	before := awsp.CallCounts()
	for range 5 {
		mustApply(t, p, ig)
	}
	g.Expect(awsp.CallCounts().Since(before)).To(BeEmpty(), "AWS calls of a Ready group reconciled 5 times")
	g.Expect(access.creates).To(Equal(1), "CreateAccessEntry asked once, not on every reconcile")

	// A new image: a launch template version and the group pointed at it,
	// nothing read again; the group now rotates (its instance drifted), so
	// AZRebalance is suspended.
	ig.Spec.EKS.Configuration.Image, ig.Generation = w.amis[1], 2
	before = awsp.CallCounts()
	obs = mustApply(t, p, ig)
	g.Expect(obs.LatestTemplateVersion).To(Equal("2"))
	g.Expect(awsp.CallCounts().Since(before).Without("Auto Scaling DescribeAutoScalingGroups", "EC2 DescribeInstances")).To(Equal(awsp.Calls{
		"EC2 CreateLaunchTemplateVersion": 1, "EC2 ModifyLaunchTemplate": 1, "Auto Scaling UpdateAutoScalingGroup": 1,
		"Auto Scaling SuspendProcesses": 1,
	}))
	g.Expect(suspendedIn(t, cfg, obs.GroupName)).To(Equal([]string{processAZRebalance}), "AZRebalance suspended while the group rotates")
	before = awsp.CallCounts()
	mustApply(t, p, ig)
	g.Expect(awsp.CallCounts().Since(before)).NotTo(HaveKey("Auto Scaling SuspendProcesses"), "suspended once, not on every reconcile")

	// After the cloud resync period, the group's reads are made again.
	p.reads.Now = func() time.Time { return time.Now().Add(2 * reads.DefaultCloudResync) }
	settle(ig, obs)
	before = awsp.CallCounts()
	mustApply(t, p, ig)
	reread := awsp.CallCounts().Since(before)
	for _, op := range []string{"IAM GetRole", "IAM ListAttachedRolePolicies", "IAM GetInstanceProfile", "EC2 DescribeSubnets", "EC2 DescribeSecurityGroups", "EC2 DescribeLaunchTemplateVersions"} {
		g.Expect(reread).To(HaveKey(op), "read again after the cloud resync period")
	}
	g.Expect(access.creates).To(Equal(2), "the access entry is asked for again after the cloud resync period")
}

// Changes made by hand are seen in the shared listing (Watch names the
// group) and undone by the next Apply, which makes no other read.
func testOutOfBandChangesAreNoticed(t *testing.T, cfg awssdk.Config) {
	g := NewWithT(t)
	w := newMotoWorld(t, cfg)
	clients := awsp.NewClients(cfg)
	p := New(clients, fake.NewClientBuilder().WithScheme(scheme(t)).Build(), Options{PollPeriod: time.Second})
	ig := w.group()
	ig.Spec.EKS.MaxSize = 3
	obs := mustApply(t, p, ig)
	settle(ig, obs)
	name := obs.GroupName

	var mu sync.Mutex
	var changed []types.NamespacedName
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		done <- p.Watch(ctx, func(k types.NamespacedName) {
			mu.Lock()
			defer mu.Unlock()
			changed = append(changed, k)
		})
	}()
	defer func() { cancel(); <-done }()
	noticed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := len(changed) > 0
		for _, k := range changed {
			g.Expect(k).To(Equal(types.NamespacedName{Namespace: "team-a", Name: "web"}))
		}
		changed = nil
		return seen
	}
	// The poll's first listing has nothing to compare with.
	g.Eventually(func() time.Duration { return time.Since(p.groupCache("prod").LastRead()) }).Should(BeNumerically(">", 0))
	time.Sleep(1500 * time.Millisecond)
	noticed()

	asc := autoscaling.NewFromConfig(cfg)
	// Desired capacity and max size changed by hand.
	_, err := asc.UpdateAutoScalingGroup(t.Context(), &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(name),
		MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(noticed, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "the change is noticed from the listing")
	before := awsp.CallCounts()
	obs = mustApply(t, p, ig)
	g.Expect(obs.Desired).To(Equal(2), "desired capacity is the user's (or the autoscaler's)")
	g.Expect(obs.Max).To(Equal(3), "max size set back to the spec's")
	g.Expect(awsp.CallCounts().Since(before).Without("Auto Scaling DescribeAutoScalingGroups", "EC2 DescribeInstances")).To(Equal(awsp.Calls{
		"Auto Scaling UpdateAutoScalingGroup": 1,
	}))

	// The group deleted by hand: noticed, and created again.
	time.Sleep(1500 * time.Millisecond) // the listing after Apply's write reports that write
	noticed()
	_, err = asc.DeleteAutoScalingGroup(t.Context(), &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(name), ForceDelete: awssdk.Bool(true)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(noticed, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "the deletion is noticed from the listing")
	g.Eventually(func() error {
		_, err := p.Apply(t.Context(), ig)
		return err
	}, 10*time.Second, 500*time.Millisecond).Should(Succeed())
	out, err := asc.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(HaveLen(1), "created again")
}

// suspendedIn returns the processes moto's group name has suspended,
// sorted.
func suspendedIn(t *testing.T, cfg awssdk.Config, name string) []string {
	t.Helper()
	out, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("DescribeAutoScalingGroups %s: %v", name, err)
	}
	var names []string
	for _, p := range out.AutoScalingGroups[0].SuspendedProcesses {
		names = append(names, awssdk.ToString(p.ProcessName))
	}
	sort.Strings(names)
	return names
}

// Amazon EC2 Auto Scaling User Guide, "Troubleshoot Amazon EC2 Auto
// Scaling: EC2 instance launch failures": a launch the group cannot make
// for lack of capacity is a scaling activity with StatusCode Failed and the
// message "We currently do not have sufficient <type> capacity in the
// Availability Zone you requested ..."; the calls that asked for it
// succeed. Apply reports it (Observation.LaunchFailure) with one
// DescribeScalingActivities while the group is short, none once it is not.
func testLaunchFailureIsReported(t *testing.T, cfg awssdk.Config, e *env.Environment) {
	g := NewWithT(t)
	w := newMotoWorld(t, cfg)
	p := New(awsp.NewClients(cfg), fake.NewClientBuilder().WithScheme(scheme(t)).Build(), Options{})
	ig := w.group()
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 1, 3
	obs := mustApply(t, p, ig)
	g.Expect(obs.LaunchFailure).To(BeEmpty())
	settle(ig, obs)

	g.Expect(e.SetInsufficientCapacity(t.Context(), "t3.medium")).To(Succeed())
	defer func() { _ = e.SetInsufficientCapacity(context.Background()) }()
	_, err := autoscaling.NewFromConfig(cfg).SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: awssdk.String(obs.GroupName), DesiredCapacity: awssdk.Int32(2)})
	g.Expect(err).NotTo(HaveOccurred(), "the call asking for capacity succeeds")
	p.groupCache("prod").Invalidate()
	before := awsp.CallCounts()
	obs = mustApply(t, p, ig)
	g.Expect(obs.Desired).To(Equal(2))
	g.Expect(obs.Instances).To(HaveLen(1))
	g.Expect(obs.LaunchFailure).To(And(ContainSubstring("InsufficientInstanceCapacity"),
		ContainSubstring("We currently do not have sufficient t3.medium capacity")))
	g.Expect(awsp.CallCounts().Since(before)).To(HaveKeyWithValue("Auto Scaling DescribeScalingActivities", 1.0))

	// A group that cannot launch trusts what it read (role, instance
	// profile, security groups: a deleted one is a cause) for
	// FailingTTL only (review 2026-11-29 N13).
	later := time.Now().Add(p.reads.FailingTTL + time.Second)
	p.reads.Now = func() time.Time { return later }
	before = awsp.CallCounts()
	g.Expect(mustApply(t, p, ig).LaunchFailure).NotTo(BeEmpty())
	reread := false
	for call := range awsp.CallCounts().Since(before) {
		reread = reread || strings.HasPrefix(call, "IAM ")
	}
	g.Expect(reread).To(BeTrue(), "the role is read again past FailingTTL while the group cannot launch: %v", awsp.CallCounts().Since(before))
	p.reads.Now = time.Now

	// Capacity back: the group launches at its next retry, and is no
	// longer short: nothing is read.
	g.Expect(e.SetInsufficientCapacity(t.Context())).To(Succeed())
	g.Eventually(func() []providers.Instance {
		p.groupCache("prod").Invalidate()
		return mustApply(t, p, ig).Instances
	}, 30*time.Second, time.Second).Should(HaveLen(2))
	before = awsp.CallCounts()
	obs = mustApply(t, p, ig)
	g.Expect(obs.LaunchFailure).To(BeEmpty())
	g.Expect(awsp.CallCounts().Since(before)).NotTo(HaveKey("Auto Scaling DescribeScalingActivities"), "a group not short reads no activity")
}
