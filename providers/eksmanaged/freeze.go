package eksmanaged

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

var _ providers.Freezer = (*Provisioner)(nil)

// frozenScaling is the scaling configuration that keeps a node group of
// scaling s from growing (a cluster-autoscaler scale-out, which EKS
// allows up to maxSize: EKS tags a managed node group's Auto Scaling
// group for the autoscaler's auto-discovery itself) without making EKS
// terminate anything: maxSize is lowered to the desired size (at least 1,
// EKS's lowest maxSize) and minSize, when above it, to the desired size.
// Nil when s already holds no room to grow, or when the node group is
// empty (desired 0: there is nothing to drain, and maxSize cannot be 0).
func frozenScaling(s *ekstypes.NodegroupScalingConfig) *ekstypes.NodegroupScalingConfig {
	if s == nil {
		return nil
	}
	desired := awssdk.ToInt32(s.DesiredSize)
	if desired < 1 || awssdk.ToInt32(s.MaxSize) <= desired && awssdk.ToInt32(s.MinSize) <= desired {
		return nil
	}
	return &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(min(awssdk.ToInt32(s.MinSize), desired)), MaxSize: awssdk.Int32(desired)}
}

// freezeNodegroup keeps ng from growing while its Nodes are drained for
// good (its retirement or the group's deletion): EKS
// UpdateNodegroupConfig with frozenScaling (EKS API Reference,
// UpdateNodegroupConfig, scalingConfig). The pods evicted from its Nodes
// go Pending, and the cluster-autoscaler would otherwise scale this very
// node group out, onto new, uncordoned nodes that the next pass drains
// again. Nothing is sent for a node group that is frozen already, empty,
// or not ACTIVE or DEGRADED (EKS refuses configuration updates then; it
// is frozen at a later pass); an update EKS refuses because another is in
// progress (ResourceInUseException) is tried at the next pass. Errors
// name the node group.
func freezeNodegroup(ctx context.Context, api awsp.EKSAPI, cluster string, ng *ekstypes.Nodegroup) error {
	if ng.Status != ekstypes.NodegroupStatusActive && ng.Status != ekstypes.NodegroupStatusDegraded {
		return nil
	}
	s := frozenScaling(ng.ScalingConfig)
	if s == nil {
		return nil
	}
	name := awssdk.ToString(ng.NodegroupName)
	_, err := api.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name), ScalingConfig: s})
	if err != nil && !isInUse(err) {
		return fmt.Errorf("eks UpdateNodegroupConfig %s (cluster %s: freezing it at maxSize %d before its nodes are drained): %w", name, cluster, awssdk.ToInt32(s.MaxSize), err)
	}
	ng.ScalingConfig.MinSize, ng.ScalingConfig.MaxSize = s.MinSize, s.MaxSize
	return nil
}

// Freeze implements providers.Freezer for a group being deleted: each of
// its node groups (those Delete would delete) is frozen (freezeNodegroup)
// before the reconciler drains their Nodes. A group that was never
// configured, or whose cluster is gone, has nothing to freeze.
func (p *Provisioner) Freeze(ctx context.Context, ig *v1alpha1.InstanceGroup) error {
	if configured(ig) != nil {
		return nil
	}
	cluster := ig.Spec.EKSManaged.Configuration.ClusterName
	names, err := listNames(ctx, p.aws.EKS, cluster)
	switch {
	case errors.Is(err, errNoCluster):
		return nil // no cluster: no node group
	case err != nil:
		return err
	}
	found, err := ownedNodegroups(ctx, p.aws.EKS, p.adopt, cluster, names, ownName(ig), ownership.OwnerOf(ig, cluster))
	if err != nil {
		return err
	}
	for _, ng := range found.groups {
		if err := freezeNodegroup(ctx, p.aws.EKS, cluster, ng); err != nil {
			return err
		}
	}
	return nil
}
