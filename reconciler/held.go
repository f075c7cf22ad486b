package reconciler

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// unwindHeld gives back what a group the admission gate holds keeps from
// others (review M3): its upgrade slot (Slots.Release), and the nodes its
// rotation cordoned, uncordoned through the drain path (releaseDrains: the
// drain stopped first, Drainer.Skip), so that no node stays cordoned and
// no slot stays taken while the group waits for a re-admission that may
// never come. The instances come from the provisioner's listing
// (providers.InstanceLister), which changes nothing in the cloud; a
// provisioner without one only releases the slot. Surge capacity stays
// recorded and is given back once the group is admitted again (Settle).
//
// It is called only for a group whose stored spec was admitted under
// earlier boundaries (ReasonBoundariesStale): one stored without
// admission (ReasonNotAdmitted) may name resources that are not its own,
// so nothing is read for it.
func (r *InstanceGroupReconciler) unwindHeld(ctx context.Context, ig *v1alpha1.InstanceGroup, prov providers.Provisioner) error {
	key := client.ObjectKeyFromObject(ig)
	if l, ok := prov.(providers.InstanceLister); ok {
		instances, err := l.Instances(ctx, ig)
		if err != nil {
			return fmt.Errorf("listing the instances of held group %s to uncordon its nodes: %w", key, err)
		}
		obs := &providers.Observation{Instances: instances}
		nodes, err := r.groupNodes(ctx, obs)
		if err != nil {
			return err
		}
		names, err := r.releaseDrains(ctx, ig, obs, nodes)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			log.FromContext(ctx).Info("held group: uncordoned the nodes its rotation had cordoned", "nodes", names)
		}
	}
	return r.Slots.Release(ctx, key)
}
