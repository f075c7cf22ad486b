package aws

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/test/env"
)

// testAutoScalingContract checks that the test environment's Auto Scaling
// (moto with test/env/motoautoscaling.py) does what AWS documents, one
// document per subtest. Every subtest fails against moto alone
// (IM_MOTO_AUTOSCALING=none). Heartbeat timeouts are a few seconds where
// AWS's minimum is 30: the emulator accepts them so the tests stay short.
func testAutoScalingContract(t *testing.T, cfg awssdk.Config, e *env.Environment) {
	c := NewClients(cfg)
	as := autoscaling.NewFromConfig(cfg)
	f := newMotoFixture(t, c, "contract-template") // v1 t3.medium (default), v2 m5.large
	subnets := strings.Split(f.subnets, ",")
	zoneOf := map[string]string{}
	out, err := c.EC2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, sn := range out.Subnets {
		zoneOf[*sn.SubnetId] = *sn.AvailabilityZone
	}
	zoneA, zoneB := zoneOf[subnets[0]], zoneOf[subnets[1]]
	NewWithT(t).Expect(zoneA < zoneB).To(BeTrue(), "the fixture's subnets are in two zones, in alphabetical order")

	group := func(t *testing.T, name string) astypes.AutoScalingGroup {
		t.Helper()
		out, err := as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out.AutoScalingGroups[0]
	}
	// states maps each instance of the group to its lifecycle state.
	states := func(t *testing.T, name string) map[string]astypes.LifecycleState {
		t.Helper()
		m := map[string]astypes.LifecycleState{}
		for _, i := range group(t, name).Instances {
			m[*i.InstanceId] = i.LifecycleState
		}
		return m
	}
	// inService lists the group's InService instances by zone.
	inService := func(t *testing.T, name string) map[string][]string {
		t.Helper()
		m := map[string][]string{}
		for _, i := range group(t, name).Instances {
			if i.LifecycleState == astypes.LifecycleStateInService {
				m[*i.AvailabilityZone] = append(m[*i.AvailabilityZone], *i.InstanceId)
			}
		}
		return m
	}
	ec2State := func(t *testing.T, id string) ec2types.InstanceStateName {
		t.Helper()
		out, err := c.EC2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return out.Reservations[0].Instances[0].State.Name
	}
	setDesired := func(t *testing.T, name string, n int32) {
		t.Helper()
		_, err := as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String(name), DesiredCapacity: awssdk.Int32(n)})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	terminate := func(t *testing.T, id string, decrement bool) {
		t.Helper()
		_, err := as.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: awssdk.String(id), ShouldDecrementDesiredCapacity: awssdk.Bool(decrement)})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	putHook := func(t *testing.T, name, transition string, heartbeat int32, result string) {
		t.Helper()
		_, err := as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: awssdk.String(name), LifecycleHookName: awssdk.String("drain"),
			LifecycleTransition: awssdk.String(transition), HeartbeatTimeout: awssdk.Int32(heartbeat), DefaultResult: awssdk.String(result)})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	completeAction := func(name, id, result string) error {
		_, err := as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: awssdk.String(name),
			LifecycleHookName: awssdk.String("drain"), InstanceId: awssdk.String(id), LifecycleActionResult: awssdk.String(result)})
		return err
	}
	useVersion := func(t *testing.T, name, version string) {
		t.Helper()
		_, err := as.UpdateAutoScalingGroup(t.Context(), &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(name),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(f.template), Version: awssdk.String(version)}})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	activities := func(t *testing.T, name string) []astypes.Activity {
		t.Helper()
		out, err := as.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: awssdk.String(name)})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return out.Activities
	}

	// Amazon EC2 Auto Scaling User Guide, "Instance distribution across
	// Availability Zones" / "Rebalancing activities": the group launches
	// into the zone with the fewest instances, keeping its zones balanced.
	t.Run("launches are spread over the group's zones", func(t *testing.T) {
		f.createGroup(t, c, "spread", "1", 4, nil)
		byZone := inService(t, "spread")
		NewWithT(t).Expect(byZone[zoneA]).To(HaveLen(2), "moto alone puts every instance in the first subnet")
		NewWithT(t).Expect(byZone[zoneB]).To(HaveLen(2))
	})

	// Amazon EC2 Auto Scaling User Guide, "Control which Auto Scaling
	// instances terminate during scale in" (as-instance-termination.html),
	// "Default termination policy": the zone with the most instances that
	// has an unprotected one first; in it, the oldest launch template
	// (version); then the instance closest to its next billing hour.
	t.Run("scale in: the zone with the most instances first, protected instances skipped", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "scale-in-zones", "1", 3, nil) // A: i1, i3; B: i2
		ids := group(t, "scale-in-zones").Instances
		first := *ids[0].InstanceId
		g.Expect(*ids[0].AvailabilityZone).To(Equal(zoneA))
		_, err := as.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{AutoScalingGroupName: awssdk.String("scale-in-zones"),
			InstanceIds: []string{first}, ProtectedFromScaleIn: awssdk.Bool(true)})
		g.Expect(err).NotTo(HaveOccurred())
		setDesired(t, "scale-in-zones", 2)
		byZone := inService(t, "scale-in-zones")
		// Zone A had two: its unprotected instance goes (moto alone takes
		// the first unprotected instance in list order, the one in B).
		g.Expect(byZone[zoneA]).To(Equal([]string{first}))
		g.Expect(byZone[zoneB]).To(HaveLen(1))
	})
	t.Run("scale in: in a zone, instances of the oldest launch template version first", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "scale-in-versions", "2", 2, nil) // A: v2, B: v2
		newer := inService(t, "scale-in-versions")
		useVersion(t, "scale-in-versions", "1")
		setDesired(t, "scale-in-versions", 4) // A: v2, v1; B: v2, v1 (launched last)
		setDesired(t, "scale-in-versions", 3) // zones tie: A (alphabetical); its v1 goes
		setDesired(t, "scale-in-versions", 2) // B has two: its v1 goes
		g.Expect(inService(t, "scale-in-versions")).To(Equal(newer), "the version 2 instances stay though launched first (moto alone keeps the newest launched)")
	})

	// Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling
	// lifecycle hooks" (lifecycle-hooks-overview.html, "How lifecycle hooks
	// work") and "Complete a lifecycle action" (completing-lifecycle-hooks.html).
	t.Run("termination hook: Terminating:Wait until CompleteLifecycleAction, the instance running", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "hooked", "1", 2, nil)
		putHook(t, "hooked", "autoscaling:EC2_INSTANCE_TERMINATING", 3600, "CONTINUE")
		before := states(t, "hooked")
		setDesired(t, "hooked", 1) // scale in
		waiting := ""
		for id, s := range states(t, "hooked") {
			if s == astypes.LifecycleStateTerminatingWait {
				waiting = id
			}
		}
		g.Expect(waiting).NotTo(BeEmpty(), "moto alone terminates at once: %v", states(t, "hooked"))
		g.Expect(before).To(HaveKey(waiting))
		g.Expect(ec2State(t, waiting)).To(Equal(ec2types.InstanceStateNameRunning))
		out, err := as.DescribeAutoScalingInstances(t.Context(), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{waiting}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(*out.AutoScalingInstances[0].LifecycleState).To(Equal(string(astypes.LifecycleStateTerminatingWait)))

		// A person's terminate without decrement: waits too, and the
		// replacement launches at once.
		var other string
		for id, s := range states(t, "hooked") {
			if s == astypes.LifecycleStateInService {
				other = id
			}
		}
		terminate(t, other, false)
		g.Expect(states(t, "hooked")).To(And(HaveLen(3), HaveKeyWithValue(other, astypes.LifecycleStateTerminatingWait),
			ContainElement(astypes.LifecycleStateInService)), "the replacement, in service beside the two waiting")

		var apiErr smithy.APIError
		err = completeAction("hooked", *group(t, "hooked").Instances[0].InstanceId+"-nosuch", "CONTINUE")
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "got %v", err)
		g.Expect(apiErr.ErrorCode()).To(Equal("ValidationError"))

		g.Expect(completeAction("hooked", waiting, "CONTINUE")).To(Succeed())
		g.Expect(completeAction("hooked", other, "ABANDON")).To(Succeed())
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "hooked") }, 10*time.Second, 100*time.Millisecond).
			ShouldNot(Or(HaveKey(waiting), HaveKey(other)))
		g.Expect(ec2State(t, waiting)).To(Equal(ec2types.InstanceStateNameTerminated))
		g.Expect(ec2State(t, other)).To(Equal(ec2types.InstanceStateNameTerminated))
	})
	// Amazon EC2 Auto Scaling User Guide, "Amazon EventBridge events for
	// Amazon EC2 Auto Scaling" (automating-ec2-auto-scaling-with-eventbridge.html,
	// "EC2 Instance-terminate Lifecycle Action"): a termination waiting on a
	// hook sends an event to the default bus; a rule with an SQS target
	// (Amazon EventBridge User Guide, "Amazon SQS as a target") delivers it,
	// the event JSON as the message body.
	t.Run("termination hook: an EC2 Instance-terminate Lifecycle Action event reaches an EventBridge rule's queue", func(t *testing.T) {
		g := NewWithT(t)
		q := sqs.NewFromConfig(cfg)
		bus := eventbridge.NewFromConfig(cfg)
		created, err := q.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: awssdk.String("contract-lifecycle-events")})
		g.Expect(err).NotTo(HaveOccurred())
		attrs, err := q.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: created.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = bus.PutRule(t.Context(), &eventbridge.PutRuleInput{Name: awssdk.String("contract-lifecycle"),
			EventPattern: awssdk.String(`{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-terminate Lifecycle Action"]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = bus.PutTargets(t.Context(), &eventbridge.PutTargetsInput{Rule: awssdk.String("contract-lifecycle"),
			Targets: []ebtypes.Target{{Id: awssdk.String("queue"), Arn: awssdk.String(attrs.Attributes["QueueArn"])}}})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			_, _ = bus.RemoveTargets(t.Context(), &eventbridge.RemoveTargetsInput{Rule: awssdk.String("contract-lifecycle"), Ids: []string{"queue"}})
			_, _ = bus.DeleteRule(t.Context(), &eventbridge.DeleteRuleInput{Name: awssdk.String("contract-lifecycle")})
		})

		f.createGroup(t, c, "evented", "1", 1, nil)
		putHook(t, "evented", "autoscaling:EC2_INSTANCE_TERMINATING", 3600, "CONTINUE")
		id := *group(t, "evented").Instances[0].InstanceId
		terminate(t, id, true)
		g.Expect(states(t, "evented")).To(HaveKeyWithValue(id, astypes.LifecycleStateTerminatingWait))

		got, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Messages).To(HaveLen(1), "moto alone sends no Auto Scaling events")
		var ev struct {
			Source     string   `json:"source"`
			DetailType string   `json:"detail-type"`
			Resources  []string `json:"resources"`
			Detail     map[string]string
		}
		g.Expect(json.Unmarshal([]byte(*got.Messages[0].Body), &ev)).To(Succeed())
		g.Expect(ev.Source).To(Equal("aws.autoscaling"))
		g.Expect(ev.DetailType).To(Equal("EC2 Instance-terminate Lifecycle Action"))
		g.Expect(ev.Resources).To(ConsistOf(HaveSuffix(":autoScalingGroupName/evented")))
		g.Expect(ev.Detail).To(And(HaveKeyWithValue("AutoScalingGroupName", "evented"), HaveKeyWithValue("LifecycleHookName", "drain"),
			HaveKeyWithValue("EC2InstanceId", id), HaveKeyWithValue("LifecycleTransition", "autoscaling:EC2_INSTANCE_TERMINATING"),
			HaveKeyWithValue("LifecycleActionToken", Not(BeEmpty())), HaveKeyWithValue("Origin", "AutoScalingGroup"), HaveKeyWithValue("Destination", "EC2")))
		g.Expect(completeAction("evented", id, "CONTINUE")).To(Succeed())
	})
	// Auto Scaling API Reference, CreateAutoScalingGroup
	// (LifecycleHookSpecificationList): the hooks come with the group.
	t.Run("termination hook given at create time: DescribeLifecycleHooks lists it, it holds a termination", func(t *testing.T) {
		g := NewWithT(t)
		_, err := as.CreateAutoScalingGroup(t.Context(), &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String("created-hooked"),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(f.template), Version: awssdk.String("1")},
			MinSize:        awssdk.Int32(0), MaxSize: awssdk.Int32(3), DesiredCapacity: awssdk.Int32(1), VPCZoneIdentifier: awssdk.String(f.subnets),
			LifecycleHookSpecificationList: []astypes.LifecycleHookSpecification{{LifecycleHookName: awssdk.String("drain"),
				LifecycleTransition: awssdk.String("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: awssdk.Int32(600), DefaultResult: awssdk.String("CONTINUE")}}})
		g.Expect(err).NotTo(HaveOccurred())
		hooks, err := as.DescribeLifecycleHooks(t.Context(), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: awssdk.String("created-hooked")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(hooks.LifecycleHooks).To(HaveLen(1), "moto alone ignores LifecycleHookSpecificationList")
		g.Expect(*hooks.LifecycleHooks[0].HeartbeatTimeout).To(Equal(int32(600)))
		g.Expect(*hooks.LifecycleHooks[0].DefaultResult).To(Equal("CONTINUE"))
		id := *group(t, "created-hooked").Instances[0].InstanceId
		terminate(t, id, true)
		g.Expect(states(t, "created-hooked")).To(HaveKeyWithValue(id, astypes.LifecycleStateTerminatingWait))
		g.Expect(completeAction("created-hooked", id, "CONTINUE")).To(Succeed())
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "created-hooked") }, 10*time.Second, 100*time.Millisecond).ShouldNot(HaveKey(id))
	})
	t.Run("termination hook: the heartbeat timeout ends the wait; a heartbeat restarts it", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "timeout", "1", 2, nil)
		putHook(t, "timeout", "autoscaling:EC2_INSTANCE_TERMINATING", 6, "ABANDON")
		ids := slices.Collect(func(yield func(string) bool) {
			for _, i := range group(t, "timeout").Instances {
				if !yield(*i.InstanceId) {
					return
				}
			}
		})
		start := time.Now()
		terminate(t, ids[0], true)
		terminate(t, ids[1], true)
		time.Sleep(3 * time.Second)
		_, err := as.RecordLifecycleActionHeartbeat(t.Context(), &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: awssdk.String("timeout"),
			LifecycleHookName: awssdk.String("drain"), InstanceId: awssdk.String(ids[1])})
		g.Expect(err).NotTo(HaveOccurred())
		// The first wait ends at its timeout (DefaultResult ABANDON still
		// terminates); the second was restarted at ~3 s and lasts to ~9 s.
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "timeout") }, 20*time.Second, 100*time.Millisecond).ShouldNot(HaveKey(ids[0]))
		g.Expect(time.Since(start)).To(BeNumerically(">=", 6*time.Second))
		if time.Since(start) < 8*time.Second {
			g.Expect(states(t, "timeout")).To(HaveKeyWithValue(ids[1], astypes.LifecycleStateTerminatingWait), "the heartbeat restarted its timeout")
		}
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "timeout") }, 20*time.Second, 100*time.Millisecond).ShouldNot(HaveKey(ids[1]))
		g.Expect(time.Since(start)).To(BeNumerically(">=", 9*time.Second))
		g.Expect(ec2State(t, ids[1])).To(Equal(ec2types.InstanceStateNameTerminated))
	})
	t.Run("launch hook: Pending:Wait until CompleteLifecycleAction", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "launch-hook", "1", 0, nil)
		putHook(t, "launch-hook", "autoscaling:EC2_INSTANCE_LAUNCHING", 3600, "ABANDON")
		setDesired(t, "launch-hook", 1)
		grp := group(t, "launch-hook")
		g.Expect(grp.Instances).To(HaveLen(1))
		id := *grp.Instances[0].InstanceId
		g.Expect(grp.Instances[0].LifecycleState).To(Equal(astypes.LifecycleStatePendingWait), "moto alone: InService at once")
		setDesired(t, "launch-hook", 1)
		g.Expect(group(t, "launch-hook").Instances).To(HaveLen(1), "a pending instance counts toward the desired capacity")
		g.Expect(completeAction("launch-hook", id, "CONTINUE")).To(Succeed())
		g.Expect(states(t, "launch-hook")).To(Equal(map[string]astypes.LifecycleState{id: astypes.LifecycleStateInService}))
	})

	// Amazon EC2 Auto Scaling User Guide, "Rebalancing activities"
	// (auto-scaling-benefits.html#AutoScalingBehavior.Rebalancing): an
	// unbalanced group launches in the short zone first, then terminates in
	// the long one; suspending AZRebalance (SuspendProcesses) stops it.
	t.Run("rebalancing after terminations with decrement, unless AZRebalance is suspended", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "rebalance", "1", 4, nil)
		f.createGroup(t, c, "rebalance-suspended", "1", 4, nil)
		_, err := as.SuspendProcesses(t.Context(), &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String("rebalance-suspended"), ScalingProcesses: []string{"AZRebalance"}})
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"rebalance", "rebalance-suspended"} {
			for _, id := range inService(t, name)[zoneA] {
				terminate(t, id, true)
			}
		}
		g.Eventually(func() map[string][]string { return inService(t, "rebalance") }, 10*time.Second, 100*time.Millisecond).
			Should(And(HaveKeyWithValue(zoneA, HaveLen(1)), HaveKeyWithValue(zoneB, HaveLen(1))), "moto alone leaves both in %s", zoneB)
		g.Expect(*group(t, "rebalance").DesiredCapacity).To(BeEquivalentTo(2))
		causes := ""
		for _, a := range activities(t, "rebalance") {
			causes += *a.Cause + "\n"
		}
		g.Expect(causes).To(ContainSubstring("Availability Zone rebalancing"))
		g.Consistently(func() map[string][]string { return inService(t, "rebalance-suspended") }, 2*time.Second, 200*time.Millisecond).
			Should(And(Not(HaveKey(zoneA)), HaveKeyWithValue(zoneB, HaveLen(2))))
	})
	t.Run("rebalancing after a subnet is removed goes through the termination hook", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "shrink-zones", "1", 2, nil)
		putHook(t, "shrink-zones", "autoscaling:EC2_INSTANCE_TERMINATING", 3600, "CONTINUE")
		leaving := inService(t, "shrink-zones")[zoneA]
		g.Expect(leaving).To(HaveLen(1))
		_, err := as.UpdateAutoScalingGroup(t.Context(), &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String("shrink-zones"), VPCZoneIdentifier: awssdk.String(subnets[1])})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "shrink-zones") }, 10*time.Second, 100*time.Millisecond).
			Should(HaveKeyWithValue(leaving[0], astypes.LifecycleStateTerminatingWait))
		g.Expect(inService(t, "shrink-zones")[zoneB]).To(HaveLen(2), "the replacement launched before the termination")
		g.Expect(ec2State(t, leaving[0])).To(Equal(ec2types.InstanceStateNameRunning))
		g.Expect(completeAction("shrink-zones", leaving[0], "CONTINUE")).To(Succeed())
		g.Eventually(func() map[string]astypes.LifecycleState { return states(t, "shrink-zones") }, 10*time.Second, 100*time.Millisecond).ShouldNot(HaveKey(leaving[0]))
		g.Expect(inService(t, "shrink-zones")).To(And(HaveLen(1), HaveKeyWithValue(zoneB, HaveLen(2))))
	})

	// DescribeScalingActivities (Amazon EC2 Auto Scaling API Reference) and
	// the User Guide's "Troubleshoot Amazon EC2 Auto Scaling: EC2 instance
	// launch failures" ("We currently do not have sufficient <instance type>
	// capacity..."): a launch short of capacity is a Failed activity, the
	// API call that asked for it succeeds.
	t.Run("scaling activities: launches, terminations and InsufficientInstanceCapacity", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "scarce", "2", 1, nil) // m5.large
		g.Expect(e.SetInsufficientCapacity(t.Context(), "m5.large")).To(Succeed())
		setDesired(t, "scarce", 2) // not refused
		g.Expect(group(t, "scarce").Instances).To(HaveLen(1), "no instance launched")
		acts := activities(t, "scarce")
		g.Expect(acts).NotTo(BeEmpty(), "moto alone lists no activities")
		g.Expect(acts[0].StatusCode).To(Equal(astypes.ScalingActivityStatusCodeFailed))
		g.Expect(*acts[0].StatusMessage).To(ContainSubstring("InsufficientInstanceCapacity"))
		g.Expect(*acts[0].Cause).To(ContainSubstring("increasing the capacity from 1 to 2"))
		g.Expect(acts[len(acts)-1].StatusCode).To(Equal(astypes.ScalingActivityStatusCodeSuccessful), "the first launch")
		g.Expect(*acts[len(acts)-1].Description).To(HavePrefix("Launching a new EC2 instance: i-"))

		// Capacity back: a later retry launches it.
		g.Expect(e.SetInsufficientCapacity(t.Context())).To(Succeed())
		g.Eventually(func() []astypes.Instance { return group(t, "scarce").Instances }, 30*time.Second, 500*time.Millisecond).Should(HaveLen(2))
		g.Expect(activities(t, "scarce")[0].StatusCode).To(Equal(astypes.ScalingActivityStatusCodeSuccessful))

		// One zone short: launches go to the other.
		g.Expect(e.SetInsufficientCapacity(t.Context(), "m5.large/"+zoneA)).To(Succeed())
		setDesired(t, "scarce", 4)
		g.Expect(inService(t, "scarce")[zoneB]).To(HaveLen(3))

		id := *group(t, "scarce").Instances[0].InstanceId
		terminate(t, id, true)
		last := activities(t, "scarce")[0]
		g.Expect(*last.Description).To(Equal("Terminating EC2 instance: " + id))
		g.Expect(*last.Cause).To(ContainSubstring("shrinking the capacity from 4 to 3"))
		g.Expect(last.StatusCode).To(Equal(astypes.ScalingActivityStatusCodeSuccessful))
	})

	// Amazon EC2 Auto Scaling User Guide, "Warm pools for Amazon EC2 Auto
	// Scaling" (ec2-auto-scaling-warm-pools.html): the pool holds
	// max(MinSize, MaxGroupPreparedCapacity - desired) instances in
	// Warmed:Stopped; a scale out takes them first.
	t.Run("warm pool: stopped instances, used by scale out", func(t *testing.T) {
		g := NewWithT(t)
		f.createGroup(t, c, "warm", "1", 1, nil)
		_, err := as.PutWarmPool(t.Context(), &autoscaling.PutWarmPoolInput{AutoScalingGroupName: awssdk.String("warm"), MinSize: awssdk.Int32(2),
			MaxGroupPreparedCapacity: awssdk.Int32(3), PoolState: astypes.WarmPoolStateStopped})
		g.Expect(err).NotTo(HaveOccurred())
		warm := func() map[string]astypes.LifecycleState {
			out, err := as.DescribeWarmPool(t.Context(), &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: awssdk.String("warm")})
			g.Expect(err).NotTo(HaveOccurred())
			m := map[string]astypes.LifecycleState{}
			for _, i := range out.Instances {
				m[*i.InstanceId] = i.LifecycleState
			}
			return m
		}
		g.Eventually(warm, 5*time.Second, 100*time.Millisecond).Should(HaveLen(2), "moto alone holds none")
		pooled := warm()
		for id, s := range pooled {
			g.Expect(s).To(Equal(astypes.LifecycleStateWarmedStopped))
			g.Expect(ec2State(t, id)).To(Equal(ec2types.InstanceStateNameStopped))
			g.Expect(states(t, "warm")).NotTo(HaveKey(id), "not a member until it leaves the pool")
		}
		setDesired(t, "warm", 2)
		var fromPool string
		for id, s := range states(t, "warm") {
			if _, ok := pooled[id]; ok {
				fromPool = id
				g.Expect(s).To(Equal(astypes.LifecycleStateInService))
			}
		}
		g.Expect(fromPool).NotTo(BeEmpty(), "the new instance came from the pool")
		g.Expect(ec2State(t, fromPool)).To(Equal(ec2types.InstanceStateNameRunning))
		g.Eventually(warm, 5*time.Second, 100*time.Millisecond).Should(And(HaveLen(2), Not(HaveKey(fromPool))), "the pool refilled")
	})
}
