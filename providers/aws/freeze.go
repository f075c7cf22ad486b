package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// FrozenProcesses are the Auto Scaling processes Freeze suspends: Launch,
// so nothing adds an instance (a scale-out by the cluster-autoscaler, the
// replacement of an unhealthy instance), and AZRebalance, which launches
// and then terminates instances of its own choosing, undrained.
var FrozenProcesses = []string{"Launch", "AZRebalance"}

// Tags of the cluster-autoscaler's auto-discovery
// (--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,
// k8s.io/cluster-autoscaler/<cluster>): a group carrying both is one it
// scales.
const (
	TagAutoscalerEnabled       = "k8s.io/cluster-autoscaler/enabled"
	TagAutoscalerClusterPrefix = "k8s.io/cluster-autoscaler/"
)

// Freeze stops the Auto Scaling group name from growing before its nodes
// are drained for good (the group is being deleted): it suspends
// FrozenProcesses (SuspendProcesses), removes the cluster-autoscaler's
// auto-discovery tags if the group carries them (DeleteTags of
// TagAutoscalerEnabled and TagAutoscalerClusterPrefix+<cluster>; the
// node-template tags stay), so the autoscaler stops counting the group as
// one of its node groups (it no longer scales it in or out, nor holds
// pods pending for it), then lowers MaxSize to what the
// group holds (UpdateAutoScalingGroup), so the cluster-autoscaler no
// longer sees room to scale it out. What the group holds is the larger of
// its desired capacity and its instances not terminating, read after the
// suspension from Auto Scaling (DescribeAutoScalingGroups by name, not a
// cached listing): a maximum below the group's size would make Auto
// Scaling scale in, terminating instances of its choosing, undrained.
//
// It returns whether it wrote anything: nothing for a frozen group, and
// nothing but the read when the group does not exist, is being deleted,
// or owned rejects it (not this caller's: never touched). Errors wrap the
// Auto Scaling call's and name the group.
func Freeze(ctx context.Context, api AutoScalingAPI, name string, owned func(types.AutoScalingGroup) bool) (bool, error) {
	g, err := describeGroup(ctx, api, name)
	if err != nil || g == nil || !owned(*g) || strings.EqualFold(awssdk.ToString(g.Status), "Delete in progress") {
		return false, err
	}
	wrote := false
	if missing := unsuspended(*g); len(missing) > 0 {
		if _, err := api.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{
			AutoScalingGroupName: awssdk.String(name), ScalingProcesses: missing}); err != nil {
			return false, fmt.Errorf("autoscaling SuspendProcesses %s %v: %w", name, missing, err)
		}
		wrote = true
		if g, err = describeGroup(ctx, api, name); err != nil || g == nil {
			return wrote, err
		}
	}
	if tags := discoveryTags(*g); len(tags) > 0 {
		del := make([]types.Tag, 0, len(tags))
		for _, k := range tags {
			del = append(del, types.Tag{ResourceId: awssdk.String(name), ResourceType: awssdk.String("auto-scaling-group"), Key: awssdk.String(k)})
		}
		if _, err := api.DeleteTags(ctx, &autoscaling.DeleteTagsInput{Tags: del}); err != nil {
			return wrote, fmt.Errorf("autoscaling DeleteTags %s %v: %w", name, tags, err)
		}
		wrote = true
	}
	hold := holds(*g)
	if awssdk.ToInt32(g.MaxSize) <= hold {
		return wrote, nil
	}
	// MinSize <= DesiredCapacity <= hold: only the maximum moves.
	in := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(name), MaxSize: awssdk.Int32(hold)}
	if _, err := api.UpdateAutoScalingGroup(ctx, in); err != nil {
		return wrote, fmt.Errorf("autoscaling UpdateAutoScalingGroup %s MaxSize %d: %w", name, hold, err)
	}
	return true, nil
}

// Frozen reports whether g, as listed, is frozen already (see Freeze).
func Frozen(g types.AutoScalingGroup) bool {
	return len(unsuspended(g)) == 0 && awssdk.ToInt32(g.MaxSize) <= holds(g) && len(discoveryTags(g)) == 0
}

// discoveryTags returns the keys of g's cluster-autoscaler auto-discovery
// tags: TagAutoscalerEnabled and TagAutoscalerClusterPrefix+<cluster> (a
// key with no further "/"; the node-template tags have one), sorted.
func discoveryTags(g types.AutoScalingGroup) []string {
	var out []string
	for _, t := range g.Tags {
		k := awssdk.ToString(t.Key)
		rest, ok := strings.CutPrefix(k, TagAutoscalerClusterPrefix)
		if ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// holds is the larger of g's desired capacity and its instances not
// terminating.
func holds(g types.AutoScalingGroup) int32 {
	var live int32
	for _, in := range g.Instances {
		if !strings.HasPrefix(string(in.LifecycleState), "Terminating") {
			live++
		}
	}
	return max(awssdk.ToInt32(g.DesiredCapacity), live)
}

// unsuspended returns the FrozenProcesses g does not have suspended.
func unsuspended(g types.AutoScalingGroup) []string {
	var out []string
	for _, p := range FrozenProcesses {
		if !slices.ContainsFunc(g.SuspendedProcesses, func(s types.SuspendedProcess) bool { return awssdk.ToString(s.ProcessName) == p }) {
			out = append(out, p)
		}
	}
	return out
}

func describeGroup(ctx context.Context, api AutoScalingAPI, name string) (*types.AutoScalingGroup, error) {
	out, err := api.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", name, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, nil
	}
	return &out.AutoScalingGroups[0], nil
}
