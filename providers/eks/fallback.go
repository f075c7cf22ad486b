package eks

import (
	"context"
	"slices"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// groupVersion is the launch template version the Auto Scaling group
// launches from: target, the version matching the spec, unless ig's
// rolling update to target stopped because its replacements never joined
// (status.rotationBatch, v1alpha1.RotationBatch.StoppedAt). Then every
// launch (a cluster-autoscaler scale-out, a node-health or Auto Scaling
// health replacement) would come from the failed version too, so the group
// goes back to the last good version: the newest version below target
// that one of instances runs (not Terminating, not a replacement that
// never joined), read through versions (instance id to launch version,
// else the instance's own). With none, target is kept. The status keeps
// target as the rotation's target, so the operator sees the failed
// version; a new version, or the resume annotation, clears the stop.
func groupVersion(ig *v1alpha1.InstanceGroup, target int64, instances []astypes.Instance, versions map[string]string) int64 {
	rec := ig.Status.RotationBatch
	if !rec.StoppedAt(strconv.FormatInt(target, 10)) {
		return target
	}
	best := int64(0)
	for _, in := range instances {
		id := awssdk.ToString(in.InstanceId)
		if strings.HasPrefix(string(in.LifecycleState), "Terminating") || slices.Contains(rec.NeverJoined, id) {
			continue
		}
		if v, err := strconv.ParseInt(launchVersion(in, versions), 10, 64); err == nil && v < target && v > best {
			best = v
		}
	}
	if best == 0 {
		return target
	}
	return best
}

// stoppedVersions is versions for groupVersion: the launch version of
// current's instances when ig's rotation to target stopped (a lookup), nil
// otherwise (no call).
func (p *Provisioner) stoppedVersions(ctx context.Context, ig *v1alpha1.InstanceGroup, target int64, current *astypes.AutoScalingGroup) (map[string]string, error) {
	if current == nil || !ig.Status.RotationBatch.StoppedAt(strconv.FormatInt(target, 10)) {
		return nil, nil
	}
	ids := make([]string, 0, len(current.Instances))
	for _, in := range current.Instances {
		ids = append(ids, awssdk.ToString(in.InstanceId))
	}
	return p.launched.lookup(ctx, ids)
}
