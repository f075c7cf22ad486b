package eks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/tagrecord"
)

// tagHooksHash on the group records the lifecycle hooks last applied, so
// hooks are only described and changed when the spec changes.
const tagHooksHash = tagrecord.KeyHooksHash

// tagMixedHash records the mixed instances policy last applied.
const tagMixedHash = "instancemgr.keikoproj.io/mixed-instances-policy"

func spotPrice(ig *v1alpha1.InstanceGroup) string { return ig.Spec.EKS.Configuration.SpotPrice }

// lifecycleOf is normal, spot or mixed.
func lifecycleOf(ig *v1alpha1.InstanceGroup) string {
	c := ig.Spec.EKS.Configuration
	if m := c.MixedInstancesPolicy; m != nil {
		if m.SpotRatio != nil && spotPercent(m) > 0 {
			return v1alpha1.LifecycleMixed
		}
		return v1alpha1.LifecycleNormal
	}
	if spotPrice(ig) != "" {
		return v1alpha1.LifecycleSpot
	}
	return v1alpha1.LifecycleNormal
}

func spotPercent(m *v1alpha1.MixedInstancesPolicySpec) int {
	if m.SpotRatio == nil {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(m.SpotRatio, 100, false)
	if err != nil {
		return 0
	}
	return min(max(n, 0), 100)
}

// groupTags are the tags of the group, propagated to its instances: Name
// (unless the spec sets it), the spec's, and with the
// cluster-autoscaler-enabled annotation the
// auto-discovery and node template tags; then the cluster's and the
// ownership tags, last, so no spec tag can replace them (admission refuses
// such keys too, see ownership.Reserved).
func groupTags(ig *v1alpha1.InstanceGroup, name string) map[string]string {
	c := ig.Spec.EKS.Configuration
	tags := map[string]string{"Name": name} // a spec may name its instances
	for _, t := range c.Tags {
		if t["key"] != "" {
			tags[t["key"]] = t["value"]
		}
	}
	if ig.Annotations[v1alpha1.AnnotationClusterAutoscalerEnabled] == "true" {
		maps.Copy(tags, autoscalerTags(ig))
	}
	tags["kubernetes.io/cluster/"+c.ClusterName] = "owned"
	maps.Copy(tags, ownerOf(ig).Tags())
	return tags
}

// Tags of the Kubernetes cluster-autoscaler's AWS provider.
const (
	// TagAutoscalerEnabled and TagAutoscalerClusterPrefix+<cluster> are what
	// its --node-group-auto-discovery=asg:tag=... matches.
	// Freeze removes them from a group being deleted (awsp.Freeze).
	TagAutoscalerEnabled       = awsp.TagAutoscalerEnabled
	TagAutoscalerClusterPrefix = awsp.TagAutoscalerClusterPrefix
	// The node template: what a node of a group at zero would look like.
	TagNodeTemplateLabel    = "k8s.io/cluster-autoscaler/node-template/label/"
	TagNodeTemplateTaint    = "k8s.io/cluster-autoscaler/node-template/taint/"
	TagNodeTemplateResource = "k8s.io/cluster-autoscaler/node-template/resources/"
)

// autoscalerTags are the cluster-autoscaler's auto-discovery tags and the
// node template of a group, so it can scale the group from zero: the
// labels the kubelet registers (the spec's and the group's own
// instancemgr.keikoproj.io/instancegroup and /namespace, which workloads
// select the group by), the taints, and the root volume as
// ephemeral-storage (CPU, memory and GPUs it knows from the instance type).
func autoscalerTags(ig *v1alpha1.InstanceGroup) map[string]string {
	c := ig.Spec.EKS.Configuration
	tags := map[string]string{
		TagAutoscalerEnabled:                       "true",
		TagAutoscalerClusterPrefix + c.ClusterName: "owned",
	}
	for k, v := range c.Labels {
		tags[TagNodeTemplateLabel+k] = v
	}
	tags[TagNodeTemplateLabel+v1alpha1.LabelInstanceGroup] = ig.Name
	tags[TagNodeTemplateLabel+v1alpha1.LabelInstanceGroupNamespace] = ig.Namespace
	for _, t := range c.Taints {
		tags[TagNodeTemplateTaint+t.Key] = t.Value + ":" + string(t.Effect)
	}
	if gib := rootVolumeGiB(c); gib > 0 {
		tags[TagNodeTemplateResource+string(corev1.ResourceEphemeralStorage)] = strconv.FormatInt(gib, 10) + "Gi"
	}
	return tags
}

// rootVolumeGiB is the size of the root volume the launch template gives
// (volSize, or the volume on a root device name), 0 when unknown.
func rootVolumeGiB(c *v1alpha1.EKSConfiguration) int64 {
	if len(c.Volumes) == 0 {
		if c.VolSize > 0 {
			return c.VolSize
		}
		return v1alpha1.DefaultVolumeSize
	}
	for _, v := range c.Volumes {
		if v.Name == "/dev/xvda" || v.Name == "/dev/sda1" {
			return v.Size
		}
	}
	return 0
}

// groupSpec is the part of CreateAutoScalingGroup/UpdateAutoScalingGroup
// that follows the spec.
type groupSpec struct {
	name, template string
	version        int64
	subnets        []string
	min, max       int32
	// instanceTypes of the mixed instances policy, resolved (see
	// instanceTypesOf).
	instanceTypes []v1alpha1.InstanceTypeSpec
	// drainHeartbeat is the drain hook's heartbeat timeout (drainHook):
	// the hook is part of the create request, so no termination of the
	// new group escapes it.
	drainHeartbeat time.Duration
}

func (g groupSpec) launchTemplate() *astypes.LaunchTemplateSpecification {
	return &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(g.template), Version: awssdk.String(strconv.FormatInt(g.version, 10))}
}

// ensureScalingGroup creates the Auto Scaling group or updates what
// differs from the spec (sizes, subnets, launch template version, mixed
// instances policy, tags), never touching the desired capacity unless it
// falls outside the new sizes. Auto Scaling CreateAutoScalingGroup,
// UpdateAutoScalingGroup, CreateOrUpdateTags, DeleteTags. It reports
// whether it wrote anything (the cache must then be invalidated).
func ensureScalingGroup(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, g groupSpec, current *astypes.AutoScalingGroup) (bool, error) {
	tags := groupTags(ig, g.name)
	policy := mixedPolicyOf(ig, g)
	var mip *astypes.MixedInstancesPolicy
	if policy != nil {
		mip = policy.sdk()
		tags[tagMixedHash] = policy.hash()
		tags[tagPurchaseOptions] = policy.purchaseOptions() // on each instance: see purchaseDrift
	}
	if current == nil {
		// The cache lists only groups tagged for the cluster: a group of
		// that name someone else made is not in it. Look it up by name
		// before creating (AWS answers AlreadyExists, but an emulator may
		// replace the group), so a foreign group is never overwritten.
		exists, err := groupExists(ctx, api, ig, g.name)
		if err != nil || exists {
			return exists, err
		}
		in := &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: awssdk.String(g.name),
			MinSize:              awssdk.Int32(g.min), MaxSize: awssdk.Int32(g.max), DesiredCapacity: awssdk.Int32(g.min),
			VPCZoneIdentifier: awssdk.String(strings.Join(g.subnets, ",")),
		}
		if mip != nil {
			in.MixedInstancesPolicy = mip
		} else {
			in.LaunchTemplate = g.launchTemplate()
		}
		in.Tags = asgTags(g.name, tagrecord.With(tags))
		if g.drainHeartbeat > 0 {
			h := drainHook(g.drainHeartbeat)
			in.LifecycleHookSpecificationList = []astypes.LifecycleHookSpecification{{
				LifecycleHookName: awssdk.String(h.Name), LifecycleTransition: awssdk.String("autoscaling:EC2_INSTANCE_TERMINATING"),
				DefaultResult: awssdk.String("CONTINUE"), HeartbeatTimeout: awssdk.Int32(int32(h.HeartbeatTimeout)),
			}}
		}
		if _, err := api.CreateAutoScalingGroup(ctx, in); err != nil {
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "AlreadyExists" {
				// Created by an earlier reconcile the cache has not seen
				// yet, or someone else's group of that name (not tagged
				// for the cluster, so not in the cache).
				return true, checkGroupOwner(ctx, api, ig, g.name)
			}
			return false, fmt.Errorf("autoscaling CreateAutoScalingGroup %s: %w", g.name, err)
		}
		return true, nil
	}

	wrote := false
	upd := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(g.name)}
	changed := false
	if awssdk.ToInt32(current.MinSize) != g.min || awssdk.ToInt32(current.MaxSize) != g.max {
		upd.MinSize, upd.MaxSize = awssdk.Int32(g.min), awssdk.Int32(g.max)
		if d := awssdk.ToInt32(current.DesiredCapacity); d < g.min || d > g.max {
			upd.DesiredCapacity = awssdk.Int32(min(max(d, g.min), g.max))
		}
		changed = true
	}
	if !sameSet(strings.Split(awssdk.ToString(current.VPCZoneIdentifier), ","), g.subnets) {
		upd.VPCZoneIdentifier = awssdk.String(strings.Join(g.subnets, ","))
		changed = true
	}
	if mip != nil {
		// The description carries defaults the request did not: compare
		// the hash recorded in a tag, and the version.
		cur := current.MixedInstancesPolicy
		if cur == nil || tagValue(current.Tags, tagMixedHash) != policy.hash() || cur.LaunchTemplate == nil ||
			cur.LaunchTemplate.LaunchTemplateSpecification == nil ||
			awssdk.ToString(cur.LaunchTemplate.LaunchTemplateSpecification.Version) != strconv.FormatInt(g.version, 10) {
			upd.MixedInstancesPolicy = mip
			changed = true
		}
	} else if lt := current.LaunchTemplate; lt == nil || awssdk.ToString(lt.LaunchTemplateName) != g.template || awssdk.ToString(lt.Version) != strconv.FormatInt(g.version, 10) {
		upd.LaunchTemplate = g.launchTemplate()
		changed = true
	}
	if changed {
		if _, err := api.UpdateAutoScalingGroup(ctx, upd); err != nil {
			return false, fmt.Errorf("autoscaling UpdateAutoScalingGroup %s: %w", g.name, err)
		}
		wrote = true
	}

	have := asgTagMap(current.Tags)
	want := tagrecord.With(tags)
	var put []astypes.Tag
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			put = append(put, asgTag(g.name, k, v))
		}
	}
	var del []astypes.Tag
	for _, k := range tagrecord.Removable(have, want) {
		del = append(del, astypes.Tag{ResourceId: awssdk.String(g.name), ResourceType: awssdk.String("auto-scaling-group"), Key: awssdk.String(k)})
	}
	if len(put) > 0 {
		sort.Slice(put, func(i, j int) bool { return *put[i].Key < *put[j].Key })
		if _, err := api.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: put}); err != nil {
			return wrote, fmt.Errorf("autoscaling CreateOrUpdateTags %s: %w", g.name, err)
		}
		wrote = true
	}
	if len(del) > 0 {
		if _, err := api.DeleteTags(ctx, &autoscaling.DeleteTagsInput{Tags: del}); err != nil {
			return wrote, fmt.Errorf("autoscaling DeleteTags %s: %w", g.name, err)
		}
		wrote = true
	}
	return wrote, nil
}

// ensureGroupFeatures converges metrics collection, suspended processes
// (the spec's, plus AZRebalance while rotating: see suspendedFor) and the
// warm pool, reading only what the group description already carries
// (lifecycle hooks: Provisioner.ensureHooks).
func ensureGroupFeatures(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, g *astypes.AutoScalingGroup, rotating bool) (bool, error) {
	name := awssdk.ToString(g.AutoScalingGroupName)
	spec := ig.Spec.EKS
	c := spec.Configuration
	wrote := false

	enabled := map[string]bool{}
	for _, m := range g.EnabledMetrics {
		enabled[awssdk.ToString(m.Metric)] = true
	}
	metricsDiffer := !sameSet(slices.Collect(maps.Keys(enabled)), c.MetricsCollection)
	if contains(c.MetricsCollection, "All") {
		metricsDiffer = len(enabled) == 0
	}
	if metricsDiffer {
		if len(enabled) > 0 {
			if _, err := api.DisableMetricsCollection(ctx, &autoscaling.DisableMetricsCollectionInput{AutoScalingGroupName: awssdk.String(name)}); err != nil {
				return wrote, fmt.Errorf("autoscaling DisableMetricsCollection %s: %w", name, err)
			}
		}
		if len(c.MetricsCollection) > 0 {
			in := &autoscaling.EnableMetricsCollectionInput{AutoScalingGroupName: awssdk.String(name), Granularity: awssdk.String("1Minute")}
			if !contains(c.MetricsCollection, "All") {
				in.Metrics = c.MetricsCollection
			}
			if _, err := api.EnableMetricsCollection(ctx, in); err != nil {
				return wrote, fmt.Errorf("autoscaling EnableMetricsCollection %s: %w", name, err)
			}
		}
		wrote = true
	}

	if w, err := ensureSuspended(ctx, api, g, suspendedFor(c, rotating)); err != nil {
		return wrote, err
	} else if w {
		wrote = true
	}

	if wp := spec.WarmPool; wp != nil {
		cur := g.WarmPoolConfiguration
		if cur == nil || awssdk.ToInt32(cur.MinSize) != int32(wp.MinSize) || awssdk.ToInt32(cur.MaxGroupPreparedCapacity) != int32(wp.MaxSize) {
			if _, err := api.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: awssdk.String(name),
				MinSize: awssdk.Int32(int32(wp.MinSize)), MaxGroupPreparedCapacity: awssdk.Int32(int32(wp.MaxSize))}); err != nil {
				return wrote, fmt.Errorf("autoscaling PutWarmPool %s: %w", name, err)
			}
			wrote = true
		}
	} else if g.WarmPoolConfiguration != nil && g.WarmPoolConfiguration.Status != astypes.WarmPoolStatusPendingDelete {
		if _, err := api.DeleteWarmPool(ctx, &autoscaling.DeleteWarmPoolInput{AutoScalingGroupName: awssdk.String(name), ForceDelete: awssdk.Bool(true)}); err != nil {
			return wrote, fmt.Errorf("autoscaling DeleteWarmPool %s: %w", name, err)
		}
		wrote = true
	}

	return wrote, nil
}

func asgTags(group string, tags map[string]string) []astypes.Tag {
	out := make([]astypes.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, asgTag(group, k, tags[k]))
	}
	return out
}

func asgTag(group, k, v string) astypes.Tag {
	return astypes.Tag{ResourceId: awssdk.String(group), ResourceType: awssdk.String("auto-scaling-group"),
		Key: awssdk.String(k), Value: awssdk.String(v), PropagateAtLaunch: awssdk.Bool(!tagrecord.Bookkeeping(k))}
}

func asgTagMap(tags []astypes.TagDescription) map[string]string {
	return ownership.TagMap(tags, func(t astypes.TagDescription) *string { return t.Key }, func(t astypes.TagDescription) *string { return t.Value })
}

// groupExists reports whether an Auto Scaling group called name exists
// (Auto Scaling DescribeAutoScalingGroups); one that is not ig's is an
// *ownership.ForeignError.
func groupExists(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, name string) (bool, error) {
	out, err := api.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return false, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", name, err)
	}
	for _, g := range out.AutoScalingGroups {
		if err := ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(g.Tags)); err != nil {
			return true, err
		}
		return true, nil
	}
	return false, nil
}

// checkGroupOwner reads the Auto Scaling group called name (Auto Scaling
// DescribeAutoScalingGroups) and returns an *ownership.ForeignError unless
// its tags name ig on its cluster.
func checkGroupOwner(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, name string) error {
	out, err := api.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", name, err)
	}
	for _, g := range out.AutoScalingGroups {
		if err := ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(g.Tags)); err != nil {
			return err
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	set := map[string]bool{}
	for _, x := range a {
		if x != "" {
			set[x] = true
		}
	}
	other := map[string]bool{}
	for _, x := range b {
		if x != "" {
			other[x] = true
		}
	}
	if len(set) != len(other) {
		return false
	}
	for x := range set {
		if !other[x] {
			return false
		}
	}
	return true
}

func tagValue(tags []astypes.TagDescription, key string) string {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value)
		}
	}
	return ""
}

func hashOf(v any) string {
	raw, _ := json.Marshal(v)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func orDefaultInt(n, d int64) int64 {
	if n == 0 {
		return d
	}
	return n
}
