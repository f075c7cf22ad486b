package eks

import (
	"context"
	"fmt"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Freeze implements providers.Freezer with aws.Freeze on the group's Auto
// Scaling group (Launch and AZRebalance suspended, the cluster-autoscaler's
// auto-discovery tags removed, MaxSize lowered to what the group holds),
// when its tags say it is ig's: called before the
// group's nodes are drained for its deletion, so that no instance joins
// (the cluster-autoscaler scaling it out for the evicted pods) while they
// are. A group the cluster's listing shows frozen gets no call. Errors
// wrap the Auto Scaling call's.
func (p *Provisioner) Freeze(ctx context.Context, ig *v1alpha1.InstanceGroup) error {
	if configured(ig) != nil {
		return nil // nothing could have been created
	}
	c := ig.Spec.EKS.Configuration
	name := groupName(ig)
	owned := func(g astypes.AutoScalingGroup) bool {
		return ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(g.Tags)) == nil
	}
	cache := p.groupCache(c.ClusterName)
	listed, _, err := cache.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if listed != nil && (!owned(*listed) || awsp.Frozen(*listed)) {
		return nil
	}
	wrote, err := awsp.Freeze(ctx, p.aws.AutoScaling, name, owned)
	if wrote {
		cache.Invalidate()
	}
	return err
}
