package rotation

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/harness"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

func TestCreateScaleAndDeleteLeavesNothingInAWS(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-create")
	ig := harness.ShortGroup("e2e-create", "web", 2, 4)
	suite.Create(t, ig)

	ready := suite.WaitReady(t, ig, 3*time.Minute)
	name := ownership.Name(ownership.LimitLaunchTemplate, suite.Cloud.Cluster, "e2e-create", "web")
	roleName := ownership.Name(ownership.LimitIAMRole, suite.Cloud.Cluster, "e2e-create", "web")
	g.Expect(ready.Status.ActiveScalingGroupName).To(Equal(name))
	g.Expect(ready.Status.CurrentMin).To(Equal(2))
	// Created roles sit under the controller's IAM path; aws-auth maps them without it.
	g.Expect(ready.Status.NodesInstanceRoleArn).To(HaveSuffix(":role/instance-manager/" + roleName))
	nodes := suite.GroupNodes(t, ig)
	g.Expect(nodes).To(HaveLen(2))
	for _, n := range nodes {
		g.Expect(n.Labels).To(HaveKeyWithValue("team", "e2e-create"))
		g.Expect(n.Labels).To(HaveKeyWithValue("a-default-label", "true"))
		g.Expect(n.Spec.ProviderID).To(HavePrefix("aws:///us-west-2"))
	}
	auth := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, eks.AuthConfigMap, auth)).To(Succeed())
	g.Expect(auth.Data["mapRoles"]).To(ContainSubstring(strings.Replace(ready.Status.NodesInstanceRoleArn, ":role/instance-manager/", ":role/", 1)))

	// The Auto Scaling group carries the tenant's and the admin's tags.
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{ready.Status.ActiveScalingGroupName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(HaveLen(1))
	tags := map[string]string{}
	for _, tg := range out.AutoScalingGroups[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	g.Expect(tags).To(HaveKeyWithValue("team", "e2e-create"))
	g.Expect(tags).To(HaveKeyWithValue("a-default-tag", "a-default-value"))

	// Scale.
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.MinSize, ready.Spec.EKS.MaxSize = 3, 5
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(3))
	scaled := suite.WaitReady(t, ig, 2*time.Minute)
	g.Expect(scaled.Status.CurrentMin).To(Equal(3))
	g.Expect(scaled.Status.CurrentMax).To(Equal(5))

	// Delete: nothing the group created remains.
	role := strings.Replace(scaled.Status.NodesInstanceRoleArn, ":role/instance-manager/", ":role/", 1) // as aws-auth maps it
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	g.Eventually(func() bool {
		err := suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 500*time.Millisecond).Should(BeTrue())
	out, err = asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(BeEmpty())
	_, err = ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	g.Expect(err).To(HaveOccurred(), "the launch template is deleted")
	_, err = iam.NewFromConfig(suite.Env.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")))
	_, err = iam.NewFromConfig(suite.Env.AWS).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")))
	g.Expect(suite.Admin.Get(ctx, eks.AuthConfigMap, auth)).To(Succeed())
	g.Expect(auth.Data["mapRoles"]).NotTo(ContainSubstring(role))
	g.Eventually(func() []corev1.Node { return suite.GroupNodes(t, ig) }, harness.ConvergeTimeout, 500*time.Millisecond).Should(BeEmpty())
}

// workload runs replicas pods on the group's nodes behind a PDB that
// allows one disruption.
func workload(t *testing.T, ig *v1alpha1.InstanceGroup, replicas int32) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": ig.Name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ig.Namespace, Name: ig.Name + "-app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{v1alpha1.LabelInstanceGroup: ig.Name},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
				},
			},
		},
	}
	g := NewWithT(t)
	g.Expect(suite.Admin.Create(context.Background(), d)).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ig.Namespace, Name: ig.Name + "-app"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	g.Expect(suite.Admin.Create(context.Background(), pdb)).To(Succeed())
	// Removed before the group (cleanups run last first): a group's
	// deletion drains its nodes, and a budget whose pods can only run on
	// them would block it.
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), pdb))
		_ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	g.Eventually(func() int32 {
		cur := &appsv1.Deployment{}
		_ = suite.Admin.Get(context.Background(), client.ObjectKeyFromObject(d), cur)
		return cur.Status.AvailableReplicas
	}, 2*time.Minute, 500*time.Millisecond).Should(Equal(replicas))
	return d
}

// watchRotation samples the group's available nodes and the workload's
// available pods every 100ms; the returned func stops sampling and
// returns the lowest of each seen.
func watchRotation(t *testing.T, ig *v1alpha1.InstanceGroup, d *appsv1.Deployment) func() (minNodes, minPods int) {
	stop, done := make(chan struct{}), make(chan struct{})
	minNodes, minPods := 1<<30, 1<<30
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			n := harness.Available(suite.GroupNodes(t, ig))
			cur := &appsv1.Deployment{}
			if err := suite.Admin.Get(context.Background(), client.ObjectKeyFromObject(d), cur); err != nil {
				continue
			}
			minNodes, minPods = min(minNodes, n), min(minPods, int(cur.Status.AvailableReplicas))
		}
	}()
	return func() (int, int) {
		close(stop)
		<-done
		return minNodes, minPods
	}
}

func TestInstanceTypeChangeRotatesSafely(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-rotate")
	ig := harness.ShortGroup("e2e-rotate", "workers", 3, 4)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	d := workload(t, ig, 3)

	watch := watchRotation(t, ig, d)
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())

	g.Eventually(func() bool {
		cur := suite.Get(t, ig)
		return cur.Status.LatestTemplateVersion == "2" && cur.Status.NodesUpdated == 3 && cur.Status.NodesTotal == 3 &&
			harness.Condition(cur, v1alpha1.ConditionUpgrading) == metav1.ConditionFalse
	}, 8*time.Minute, time.Second).Should(BeTrue(), "all three instances rotated")
	suite.WaitReady(t, ig, 2*time.Minute)
	minNodes, minPods := watch()
	g.Expect(minNodes).To(BeNumerically(">=", 2), "never more than maxUnavailable (1) of 3 nodes down")
	g.Expect(minPods).To(BeNumerically(">=", 2), "the PodDisruptionBudget (maxUnavailable 1 of 3) is honoured")

	events := &corev1.EventList{}
	g.Expect(suite.Admin.List(ctx, events, client.InNamespace("e2e-rotate"))).To(Succeed())
	drained := 0
	for _, e := range events.Items {
		if e.Reason == "NodeDrained" {
			drained++
		}
	}
	g.Expect(drained).To(BeNumerically(">=", 3))
	suite.WaitNodesLabelled(t, ig, "node.kubernetes.io/instance-type", "m5.large", 3, time.Minute)
}

func TestBoundaryImageChangeRollsEveryGroupAtMostNAtATime(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 1))
	groups := suite.ReadyGroups(t, "e2e-fan-a", "e2e-fan-b", "e2e-fan-c")

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 1))
	maxRotating := 0
	g.Eventually(func() bool {
		// One snapshot: a Get per group could count a group that stopped
		// before another started.
		current, err := suite.GroupsByKey(ctx)
		if err != nil {
			return false
		}
		rotating, done := 0, 0
		for _, ig := range groups {
			cur := current[ig.Namespace+"/"+ig.Name]
			if cur == nil {
				return false
			}
			if harness.Condition(cur, v1alpha1.ConditionUpgrading) == metav1.ConditionTrue {
				rotating++
			}
			if cur.Spec.EKS.Configuration.Image == suite.Cloud.AMIs[1] && cur.Status.LatestTemplateVersion == "2" &&
				cur.Status.NodesUpdated == cur.Status.NodesTotal && cur.Status.CurrentState == v1alpha1.StateReady {
				done++
			}
		}
		maxRotating = max(maxRotating, rotating)
		return done == len(groups)
	}, 8*time.Minute, 200*time.Millisecond).Should(BeTrue(), "every group rolls to the new image")
	g.Expect(maxRotating).To(Equal(1), "rollout.maxConcurrentUpgrades: 1")
	for _, ig := range groups {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
}

func TestRotationFinishesAfterAManagerRestart(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-restart")
	ig := harness.ShortGroup("e2e-restart", "nodes", 3, 4)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "c5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	// Kill the manager once the first node is being drained.
	g.Eventually(func() bool {
		for _, n := range suite.GroupNodes(t, ig) {
			if n.Spec.Unschedulable {
				return true
			}
		}
		return false
	}, 4*time.Minute, 100*time.Millisecond).Should(BeTrue())
	g.Expect(suite.Manager.Stop()).To(Succeed())
	g.Expect(oldInstances(t, ready.Status.ActiveScalingGroupName, "2")).NotTo(BeZero(), "stopped mid-rotation")

	restarted, err := suite.StartManager()
	g.Expect(err).NotTo(HaveOccurred())
	suite.Manager = restarted
	g.Eventually(func() string { return describe(suite.Get(t, ig)) }, 6*time.Minute, time.Second).Should(Equal("Ready v2 3/3 surge 0"))
	g.Expect(oldInstances(t, ready.Status.ActiveScalingGroupName, "2")).To(BeZero())
	g.Expect(suite.Get(t, ig).Status.LatestTemplateVersion).To(Equal("2"))
	// The last replaced instance leaves the Auto Scaling group before its
	// Node object goes (the bridge, like the cloud node lifecycle controller,
	// deletes it on its next pass), so the drained old Node may still be
	// listed for a moment; no Node may stay cordoned or marked.
	g.Eventually(func() []string { return suite.HeldNodes(t, ig) }, time.Minute, time.Second).Should(BeEmpty(), "no Node of the group stays cordoned or marked for drain")
}

// oldInstances counts the group's instances launched from another launch
// template version than version (EC2 tag aws:ec2launchtemplate:version).
func oldInstances(t *testing.T, group, version string) int {
	t.Helper()
	ctx := context.Background()
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("describing group %s: %v", group, err)
	}
	var ids []string
	for _, in := range out.AutoScalingGroups[0].Instances {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	if len(ids) == 0 {
		return 0
	}
	desc, err := ec2.NewFromConfig(suite.Env.AWS).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	old := 0
	for _, r := range desc.Reservations {
		for _, in := range r.Instances {
			for _, tag := range in.Tags {
				if aws.ToString(tag.Key) == "aws:ec2launchtemplate:version" && aws.ToString(tag.Value) != version {
					old++
				}
			}
		}
	}
	return old
}

// describe summarizes a group's rotation: state, template version,
// updated/total, surge capacity outstanding (and the Upgrading message
// while rotating).
func describe(ig *v1alpha1.InstanceGroup) string {
	s := fmt.Sprintf("%s v%s %d/%d surge %d", ig.Status.CurrentState, ig.Status.LatestTemplateVersion,
		ig.Status.NodesUpdated, ig.Status.NodesTotal, ig.Status.SurgeCapacity)
	for _, c := range ig.Status.Conditions {
		if c.Type == v1alpha1.ConditionUpgrading && c.Status == metav1.ConditionTrue {
			s += ": " + c.Message
		}
	}
	return s
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestMaxSurgeLaunchesBeforeDraining(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-surge")
	ig := harness.ShortGroup("e2e-surge", "surge", 2, 3)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	d := workload(t, ig, 2)

	watch := watchRotation(t, ig, d)
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "r5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		return describe(cur)
	}, 8*time.Minute, time.Second).Should(Equal("Ready v2 2/2 surge 0"), "both instances rotated and the surge given back")
	minNodes, minPods := watch()
	g.Expect(minNodes).To(BeNumerically(">=", 2), "with maxSurge a node is drained only once its surge replacement is Ready")
	g.Expect(minPods).To(BeNumerically(">=", 1))
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{ready.Status.ActiveScalingGroupName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity)).To(BeEquivalentTo(2), "the desired capacity is back to its size before the surge")
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}

// TestSurgeKeepsAnOutsideRaiseOfTheDesiredCapacity: while a maxSurge
// rollout runs, someone else (here directly in moto, as the
// cluster-autoscaler would) raises the desired capacity by 2. The surge
// adds its own capacity on top of whatever the desired capacity is and
// gives back exactly what it added, so the raise is still there when the
// rollout ends (review finding 8: the surge took it for its own).
func TestSurgeKeepsAnOutsideRaiseOfTheDesiredCapacity(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-surge-ca")
	ig := harness.ShortGroup("e2e-surge-ca", "surge", 2, 6)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	group := ready.Status.ActiveScalingGroupName
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	desired := func() int32 {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
		g.Expect(err).NotTo(HaveOccurred())
		return aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity)
	}
	g.Expect(desired()).To(BeEquivalentTo(2))

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "c5.large"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())
	// Once the first surge is out (recorded, and the desired capacity
	// raised by it in AWS), raise the desired capacity from outside by 2,
	// on top of what it is then. (A raise within the one round trip
	// between the controller's read of the desired capacity and its write
	// could be overwritten, as between any two writers of it; the
	// cluster-autoscaler has the same window with its own writes.)
	g.Eventually(func() bool { return suite.Get(t, ig).Status.SurgeCapacity > 0 && desired() == 3 }, 3*time.Minute, 20*time.Millisecond).Should(BeTrue())
	raised := desired() + 2
	_, err := asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(raised)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("desired capacity raised from outside to %d during the surge", raised)

	g.Eventually(func() string { return describe(suite.Get(t, ig)) }, 8*time.Minute, time.Second).Should(Equal("Ready v2 4/4 surge 0"),
		"every instance rotated, the outside raise's included, and the surge given back")
	g.Expect(desired()).To(BeEquivalentTo(4), "2 before the rollout + 2 raised from outside; the surge gave back exactly what it added")
	g.Expect(oldInstances(t, group, "2")).To(BeZero())
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}

func TestDrainBlockedByAPodDisruptionBudgetIsSkippedNotForced(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-blocked")
	ig := harness.ShortGroup("e2e-blocked", "single", 1, 1)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	d := workload(t, ig, 1)
	// The only replica may not be disrupted at all.
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), pdb)).To(Succeed())
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	g.Expect(suite.Admin.Update(ctx, pdb)).To(Succeed())

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.2xlarge"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())

	// The drain times out (--drain-timeout 15s in this suite): reported, the
	// node uncordoned and skipped, the pod never evicted.
	event, err := harness.WaitForEvent(ctx, suite.Admin, "e2e-blocked", "single", upgrade.ReasonDrainBlocked, "could not be drained", 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(event.Note).To(ContainSubstring("e2e-blocked/single-app-"))
	g.Eventually(func() bool {
		nodes := suite.GroupNodes(t, ig)
		return len(nodes) == 1 && !nodes[0].Spec.Unschedulable && nodes[0].Annotations[drain.AnnotationDrainSkippedUntil] != ""
	}, harness.ConvergeTimeout, 200*time.Millisecond).Should(BeTrue(), "the blocked node is uncordoned and skipped")
	cur := &appsv1.Deployment{}
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
	g.Expect(cur.Status.AvailableReplicas).To(BeEquivalentTo(1), "the protected pod was not evicted")
	g.Expect(oldInstances(t, ready.Status.ActiveScalingGroupName, "2")).To(Equal(1), "the instance was not forced out")

	// Once the budget allows it, the rotation finishes after the skip window.
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), pdb)).To(Succeed())
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	g.Expect(suite.Admin.Update(ctx, pdb)).To(Succeed())
	g.Eventually(func() string { return describe(suite.Get(t, ig)) }, 4*time.Minute, time.Second).Should(Equal("Ready v2 1/1 surge 0"))
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}
