package instancegroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// unwindHeld gives back what a group the admission gate holds keeps from
// others (review M3): its upgrade slot (Slots.Release), and the nodes its
// rotation cordoned, uncordoned through the drain path (releaseDrains: the
// drain stopped first, then drain.Drainer.Release; only the rotation's own
// drains, never an interruption's or a termination's), so that no node
// stays cordoned and
// no slot stays taken while the group waits for a re-admission that may
// never come. Node health keeps running (NodeHealth.Check, on the NodesHealthy
// condition the caller stores): an instance that never joined or stopped
// being Ready is replaced from the launch template the group already has,
// as it would be if the group were not held; the rotation itself waits.
// The instances come from the provisioner's listing
// (providers.InstanceLister); a provisioner without one only releases the
// slot. Surge capacity the rotation added (status.surgeCapacity, or a
// give-back under way) is given back while held, through the path a
// finished rotation uses (RollingUpdate.Settle: chosen nodes drained, then
// terminated with a capacity decrement, never below minSize), with the
// sizes read without applying the spec (providers.SizeReader); the nodes
// it drains are not uncordoned. A node-health error is returned after the
// slot is released.
//
// It is called only for a group whose stored spec was admitted under
// earlier boundaries (ReasonBoundariesStale): one stored without
// admission (ReasonNotAdmitted) may name resources that are not its own,
// so nothing is read for it.
func (r *Reconciler) unwindHeld(ctx context.Context, ig *v1alpha1.InstanceGroup, prov providers.Provisioner) error {
	key := client.ObjectKeyFromObject(ig)
	var healthErr error
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
		rot, _ := prov.(providers.Rotator)
		sizes, _ := prov.(providers.SizeReader)
		settle := r.Rolling != nil && rot != nil && sizes != nil &&
			(ig.Status.SurgeCapacity > 0 || ig.Status.SurgeBaseCapacity > 0 || upgrade.GivingBack(obs, nodes))
		if settle {
			minSize, desired, found, err := sizes.Sizes(ctx, ig)
			if err != nil {
				return fmt.Errorf("reading the sizes of held group %s to give its surge back: %w", key, err)
			}
			obs.Min, obs.Desired, settle = minSize, desired, found
		}
		// The nodes being drained to give surge back go on draining (the
		// give-back below); every other drain of the rotation is stopped.
		release := nodes
		if settle {
			release = map[string]*corev1.Node{}
			for id, n := range nodes {
				if n.Annotations[drain.AnnotationSurge] != "true" {
					release[id] = n
				}
			}
		}
		names, err := r.releaseDrains(ctx, ig, obs, release)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			log.FromContext(ctx).Info("held group: uncordoned the nodes its rotation had cordoned", "nodes", names)
		}
		if settle {
			msg, err := r.Rolling.Settle(ctx, ig, obs, nodes, rot)
			if err != nil {
				return fmt.Errorf("giving back the surge of held group %s: %w", key, err)
			}
			if msg != "" {
				log.FromContext(ctx).Info("held group: giving its surge back", "message", msg)
			}
		}
		if r.NodeHealth != nil {
			if _, err := r.NodeHealth.Check(ctx, ig, obs, nodes, rot); err != nil {
				healthErr = fmt.Errorf("node health of held group %s: %w", key, err)
			}
		}
	}
	if err := r.Slots.Release(ctx, key, slots.ReasonHeld); err != nil {
		return err
	}
	return healthErr
}
