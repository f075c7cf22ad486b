package eks

import (
	"context"
	"fmt"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// warmPools keeps a group's warm pool free of instances launched from an
// older launch template version. Auto Scaling takes a replacement from
// the warm pool when it has one: during a rotation, a warm instance of
// the old version would join as a drifted node and be rotated a second
// time. So once per new version, the warm pool is read (DescribeWarmPool);
// if it holds older instances it is deleted with them (DeleteWarmPool,
// ForceDelete) and ensureGroupFeatures puts it back once Auto Scaling has
// removed it, filled from the new version. Until then the rotation waits
// (Observation.Hold).
type warmPools struct {
	mu sync.Mutex
	// clean is the launch template version each group's warm pool was last
	// found free of older instances at.
	clean map[string]int64
}

// hold returns why the rotation of group g must wait for its warm pool
// ("" when it need not), deleting a warm pool that holds instances of
// versions that are not up to date with version (upToDate judges a
// version by content, see versionContents). launched tells the version an
// instance was launched from when DescribeWarmPool does not.
func (w *warmPools) hold(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, g *astypes.AutoScalingGroup, version int64,
	upToDate func(string) bool, launched func(ctx context.Context, ids []string) (map[string]string, error)) (string, bool, error) {
	name := awssdk.ToString(g.AutoScalingGroupName)
	if ig.Spec.EKS.WarmPool == nil {
		return "", false, nil
	}
	if cfg := g.WarmPoolConfiguration; cfg != nil && cfg.Status == astypes.WarmPoolStatusPendingDelete {
		return fmt.Sprintf("waiting for the warm pool of %s to be deleted with its instances of older launch template versions (it is put back from version %d)", name, version), false, nil
	}
	if g.WarmPoolConfiguration == nil {
		// Being put back by ensureGroupFeatures: filled from this version.
		return "", false, nil
	}
	w.mu.Lock()
	done := w.clean[name] == version
	w.mu.Unlock()
	if done {
		return "", false, nil
	}
	var warm []astypes.Instance
	in := &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: awssdk.String(name)}
	for {
		out, err := api.DescribeWarmPool(ctx, in)
		if err != nil {
			return "", false, fmt.Errorf("autoscaling DescribeWarmPool %s: %w", name, err)
		}
		warm = append(warm, out.Instances...)
		if awssdk.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	var unknown []string
	for _, i := range warm {
		if i.LaunchTemplate == nil || awssdk.ToString(i.LaunchTemplate.Version) == "" {
			unknown = append(unknown, awssdk.ToString(i.InstanceId))
		}
	}
	byTag := map[string]string{}
	if len(unknown) > 0 {
		var err error
		if byTag, err = launched(ctx, unknown); err != nil {
			return "", false, err
		}
	}
	stale := 0
	for _, i := range warm {
		v := byTag[awssdk.ToString(i.InstanceId)]
		if i.LaunchTemplate != nil && awssdk.ToString(i.LaunchTemplate.Version) != "" {
			v = awssdk.ToString(i.LaunchTemplate.Version)
		}
		if v != "" && !upToDate(v) { // a version nobody reports is not taken for old: no delete loop
			stale++
		}
	}
	if stale == 0 {
		w.mu.Lock()
		if w.clean == nil {
			w.clean = map[string]int64{}
		}
		w.clean[name] = version
		w.mu.Unlock()
		return "", false, nil
	}
	if _, err := api.DeleteWarmPool(ctx, &autoscaling.DeleteWarmPoolInput{AutoScalingGroupName: awssdk.String(name), ForceDelete: awssdk.Bool(true)}); err != nil {
		return "", false, fmt.Errorf("autoscaling DeleteWarmPool %s (%d warm instance(s) of older launch template versions): %w", name, stale, err)
	}
	return fmt.Sprintf("replacing the warm pool of %s: %d warm instance(s) of older launch template versions would join as drifted nodes and rotate a second time", name, stale), true, nil
}
