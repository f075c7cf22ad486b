package eks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// processAZRebalance is suspended while a group rotates: AZ rebalancing
// launches an instance in one zone and terminates one of Auto Scaling's
// choosing in another, which nothing drains, and a rotation unbalances a
// group for a while (a surge lands in one zone, a drained instance leaves
// another).
const processAZRebalance = "AZRebalance"

// allProcesses is the number of Auto Scaling processes ("All": Launch,
// Terminate, AddToLoadBalancer, AlarmNotification, AZRebalance,
// HealthCheck, InstanceRefresh, ReplaceUnhealthy, ScheduledActions).
const allProcesses = 9

// rotating reports whether ig's group is being rotated, from state that
// outlives a controller restart: an instance not terminating that has
// drifted (drift: instance id to why, see driftReasons: its launch
// template content, subnet, instance type or purchase options), or a
// surge recorded in the status (a give-back under way keeps it until its
// last instance goes).
func rotating(ig *v1alpha1.InstanceGroup, instances []astypes.Instance, drift map[string]string) bool {
	if st := ig.Status; st.SurgeCapacity > 0 || st.SurgeBaseCapacity > 0 || st.SurgeReturn != nil {
		return true
	}
	for _, in := range instances {
		if strings.HasPrefix(string(in.LifecycleState), "Terminating") {
			continue
		}
		if drift[awssdk.ToString(in.InstanceId)] != "" {
			return true
		}
	}
	return false
}

// suspendedFor is the set of processes ig's group has suspended: the
// spec's suspendProcesses, plus AZRebalance while it rotates.
func suspendedFor(c *v1alpha1.EKSConfiguration, rotating bool) []string {
	want := slices.Clone(c.SuspendProcesses)
	if rotating && !contains(want, "All") && !contains(want, processAZRebalance) {
		want = append(want, processAZRebalance)
	}
	return want
}

// ensureSuspended converges g's suspended processes on want ("All": every
// process) with ResumeProcesses of those suspended but not wanted and
// SuspendProcesses of those wanted but not suspended, so a process
// suspended in both states is never resumed in between. It returns
// whether it wrote; errors wrap the Auto Scaling call's and name the
// group.
func ensureSuspended(ctx context.Context, api awsp.AutoScalingAPI, g *astypes.AutoScalingGroup, want []string) (bool, error) {
	name := awssdk.ToString(g.AutoScalingGroupName)
	var have []string
	for _, p := range g.SuspendedProcesses {
		have = append(have, awssdk.ToString(p.ProcessName))
	}
	if contains(want, "All") {
		if len(have) >= allProcesses {
			return false, nil
		}
		if _, err := api.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String(name)}); err != nil {
			return false, fmt.Errorf("autoscaling SuspendProcesses %s: %w", name, err)
		}
		return true, nil
	}
	var resume, suspend []string
	for _, p := range have {
		if !contains(want, p) {
			resume = append(resume, p)
		}
	}
	for _, p := range want {
		if p != "" && !contains(have, p) && !contains(suspend, p) {
			suspend = append(suspend, p)
		}
	}
	wrote := false
	if len(resume) > 0 {
		if _, err := api.ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{AutoScalingGroupName: awssdk.String(name), ScalingProcesses: resume}); err != nil {
			return false, fmt.Errorf("autoscaling ResumeProcesses %s %v: %w", name, resume, err)
		}
		wrote = true
	}
	if len(suspend) > 0 {
		if _, err := api.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: awssdk.String(name), ScalingProcesses: suspend}); err != nil {
			return wrote, fmt.Errorf("autoscaling SuspendProcesses %s %v: %w", name, suspend, err)
		}
		wrote = true
	}
	return wrote, nil
}

// launchVersion is the launch template version instance in was launched
// from: EC2's tag (versions, instance id to version), else what Auto
// Scaling reports ("" when neither tells).
func launchVersion(in astypes.Instance, versions map[string]string) string {
	v, ok := versions[awssdk.ToString(in.InstanceId)]
	if !ok && in.LaunchTemplate != nil {
		v = awssdk.ToString(in.LaunchTemplate.Version)
	}
	return v
}

// launchVersions is the launch version of each of instances (launchVersion).
func launchVersions(instances []astypes.Instance, versions map[string]string) []string {
	out := make([]string, 0, len(instances))
	for _, in := range instances {
		out = append(out, launchVersion(in, versions))
	}
	return out
}
