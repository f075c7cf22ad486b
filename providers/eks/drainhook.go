package eks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// drainHook is the termination lifecycle hook every Auto Scaling group of
// the eks provisioner carries (awsp.DrainHookName): each termination Auto
// Scaling starts (scale in, TerminateInstanceInAutoScalingGroup, health
// replacement, rebalancing, max instance lifetime, a person in the
// console) waits in Terminating:Wait for up to heartbeat (whole seconds,
// 30 to 7200) while reconciler/termination drains the node, then goes on
// (DefaultResult CONTINUE: a controller that is down delays terminations,
// it does not block them).
func drainHook(heartbeat time.Duration) v1alpha1.LifecycleHookSpec {
	secs := int64((heartbeat + time.Second - 1) / time.Second)
	secs = min(max(secs, int64(awsp.MinHookHeartbeat/time.Second)), int64(awsp.MaxHookHeartbeat/time.Second))
	return v1alpha1.LifecycleHookSpec{Name: awsp.DrainHookName, Lifecycle: "terminate", DefaultResult: "continue", HeartbeatTimeout: secs}
}

// desiredHooks are the lifecycle hooks a group must carry: the spec's, then
// the drain hook. A spec hook of the drain hook's name (admission refuses
// it) is dropped: the drain hook's settings are not the spec's to change.
func desiredHooks(spec []v1alpha1.LifecycleHookSpec, heartbeat time.Duration) []v1alpha1.LifecycleHookSpec {
	out := slices.DeleteFunc(slices.Clone(spec), func(h v1alpha1.LifecycleHookSpec) bool { return h.Name == awsp.DrainHookName })
	return append(out, drainHook(heartbeat))
}

// stageHooks is the Reads stage of a group's lifecycle hooks, keyed by
// the hash of the hooks it must carry.
const stageHooks = "lifecycle-hooks"

// ensureHooks makes the group's lifecycle hooks desiredHooks: the spec's
// and the drain hook. It costs no call when the listing's tag
// instancemgr.keikoproj.io/lifecycle-hooks records this set (groups with
// hooks of their own) or Reads remembers having checked it within
// CloudResync; otherwise Auto Scaling DescribeLifecycleHooks, then
// PutLifecycleHook for each hook missing or different and
// DeleteLifecycleHook for the others. It reports whether it wrote.
// A hook deleted by hand comes back within CloudResync, or on the next
// change of the spec's hooks for a group whose tag records them.
func (p *Provisioner) ensureHooks(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID, g *astypes.AutoScalingGroup) (bool, error) {
	name := awssdk.ToString(g.AutoScalingGroupName)
	spec := ig.Spec.EKS.Configuration.LifecycleHooks
	hooks := desiredHooks(spec, p.opts.DrainHookHeartbeat)
	key := hashOf(hooks)
	recorded := tagValue(g.Tags, tagHooksHash)
	if recorded == key {
		return false, nil
	}
	if _, ok := p.reads.Load(gid, gid, stageHooks, key); ok {
		return false, nil
	}
	wrote, err := syncHooks(ctx, p.aws.AutoScaling, name, hooks)
	if err != nil {
		return wrote, err
	}
	// The tag is kept for groups with hooks of their own (the admission's
	// tag count allows it for them only).
	if len(spec) > 0 || recorded != "" {
		if _, err := p.aws.AutoScaling.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: []astypes.Tag{{
			ResourceId: awssdk.String(name), ResourceType: awssdk.String("auto-scaling-group"),
			Key: awssdk.String(tagHooksHash), Value: awssdk.String(key), PropagateAtLaunch: awssdk.Bool(false)}}}); err != nil {
			return true, fmt.Errorf("autoscaling CreateOrUpdateTags %s: %w", name, err)
		}
		wrote = true
	}
	p.reads.Store(gid, stageHooks, key, true)
	return wrote, nil
}

// syncHooks makes the group's lifecycle hooks exactly hooks: Auto Scaling
// DescribeLifecycleHooks, PutLifecycleHook for each hook missing or
// different (PutLifecycleHook creates or replaces), DeleteLifecycleHook for
// the others. It reports whether it wrote.
func syncHooks(ctx context.Context, api awsp.AutoScalingAPI, group string, hooks []v1alpha1.LifecycleHookSpec) (bool, error) {
	out, err := api.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: awssdk.String(group)})
	if err != nil {
		return false, fmt.Errorf("autoscaling DescribeLifecycleHooks %s: %w", group, err)
	}
	have := map[string]astypes.LifecycleHook{}
	for _, h := range out.LifecycleHooks {
		have[awssdk.ToString(h.LifecycleHookName)] = h
	}
	wrote := false
	want := map[string]bool{}
	for _, h := range hooks {
		want[h.Name] = true
		in := putHookInput(group, h)
		if cur, ok := have[h.Name]; ok && sameHook(cur, in) {
			continue
		}
		if _, err := api.PutLifecycleHook(ctx, in); err != nil {
			return wrote, fmt.Errorf("autoscaling PutLifecycleHook %s/%s: %w", group, h.Name, err)
		}
		wrote = true
	}
	for n, h := range have {
		if want[n] {
			continue
		}
		if _, err := api.DeleteLifecycleHook(ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: awssdk.String(group), LifecycleHookName: h.LifecycleHookName}); err != nil {
			return wrote, fmt.Errorf("autoscaling DeleteLifecycleHook %s/%s: %w", group, n, err)
		}
		wrote = true
	}
	return wrote, nil
}

// putHookInput is the PutLifecycleHook request of spec hook h
// (defaults: DefaultResult ABANDON, HeartbeatTimeout 300 s).
func putHookInput(group string, h v1alpha1.LifecycleHookSpec) *autoscaling.PutLifecycleHookInput {
	transition := "autoscaling:EC2_INSTANCE_LAUNCHING"
	if h.Lifecycle == "terminate" {
		transition = "autoscaling:EC2_INSTANCE_TERMINATING"
	}
	in := &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: awssdk.String(group), LifecycleHookName: awssdk.String(h.Name),
		LifecycleTransition: awssdk.String(transition), DefaultResult: awssdk.String(strings.ToUpper(orDefault(h.DefaultResult, "abandon"))),
		HeartbeatTimeout: awssdk.Int32(int32(orDefaultInt(h.HeartbeatTimeout, 300))),
	}
	if h.NotificationArn != "" {
		in.NotificationTargetARN, in.RoleARN = awssdk.String(h.NotificationArn), awssdk.String(h.RoleArn)
	}
	if h.Metadata != "" {
		in.NotificationMetadata = awssdk.String(h.Metadata)
	}
	return in
}

// sameHook reports whether the described hook cur is what in asks for.
// Notification target and role are compared only when in names them
// (without them AWS and the emulator fill in their own).
func sameHook(cur astypes.LifecycleHook, in *autoscaling.PutLifecycleHookInput) bool {
	same := awssdk.ToString(cur.LifecycleTransition) == awssdk.ToString(in.LifecycleTransition) &&
		strings.EqualFold(awssdk.ToString(cur.DefaultResult), awssdk.ToString(in.DefaultResult)) &&
		awssdk.ToInt32(cur.HeartbeatTimeout) == awssdk.ToInt32(in.HeartbeatTimeout) &&
		awssdk.ToString(cur.NotificationMetadata) == awssdk.ToString(in.NotificationMetadata)
	if in.NotificationTargetARN != nil {
		same = same && awssdk.ToString(cur.NotificationTargetARN) == *in.NotificationTargetARN && awssdk.ToString(cur.RoleARN) == awssdk.ToString(in.RoleARN)
	}
	return same
}

// TerminationWaits implements providers.TerminationWaits: the instances in
// Terminating:Wait of every cluster's current listing (no AWS call), in
// groups that name their InstanceGroup in the ownership tag.
func (p *Provisioner) TerminationWaits() []providers.TerminationWait {
	var out []providers.TerminationWait
	for _, g := range p.listed() {
		owner, ok := listedOwner(g)
		if !ok {
			continue
		}
		for _, in := range g.Instances {
			if !awsp.TerminatingWait(in) {
				continue
			}
			id := awssdk.ToString(in.InstanceId)
			out = append(out, providers.TerminationWait{
				Group: owner, ScalingGroup: awssdk.ToString(g.AutoScalingGroupName),
				InstanceID: id, ProviderID: providerID(awssdk.ToString(in.AvailabilityZone), id),
			})
		}
	}
	return out
}

// providerID is the spec.providerID of the Node of EC2 instance id in
// zone: aws:///<zone>/<id> (the AWS cloud provider's form).
func providerID(zone, id string) string {
	return fmt.Sprintf("aws:///%s/%s", zone, id)
}
