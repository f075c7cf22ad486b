package instancegroup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// groupDisruptions is providers.Disruptions for the group a reconcile
// applies (eks-managed, eks-fargate): the upgrade slots eks rotations
// take (Slots: --max-concurrent-upgrades and the namespace's quota), and
// the drain runner eks rotations and deletions use (Rolling.Drains,
// Rolling.Drainer), paced by the group's maxUnavailable.
type groupDisruptions struct {
	r  *Reconciler
	ig *v1alpha1.InstanceGroup
	// tally, when set, records what the retirement drains saw (the
	// managed stall timeout reads it; see managedStall).
	tally *retireTally
}

var _ providers.Disruptions = groupDisruptions{}

// Admit takes (or finds held) the group's upgrade slot (slots.Keeper
// .Acquire, a Lease with slots.Leases). Outside the maintenance
// windows only a group that holds its slot already (a replacement under
// way) is admitted: none starts. A group whose slot was released for lack
// of progress less than the stall timeout ago is not admitted
// (stalledAt): the groups waiting get the slot first.
func (d groupDisruptions) Admit(ctx context.Context) (bool, error) {
	key := client.ObjectKeyFromObject(d.ig)
	if _, stalled := d.r.stalledAt(d.ig, d.r.now()); stalled {
		return false, nil
	}
	if why, holder, err := d.r.maintenanceWait(ctx, key); err != nil || (why != "" && !holder) {
		return false, err
	}
	return d.r.Slots.Acquire(ctx, key, d.ig.UID)
}

// DrainNodes drains the Nodes labelled key=value (read from the cache),
// sorted by name, at most upgrade.MaxUnavailable of them at once (see
// retireNodes). Errors come from the API server.
func (d groupDisruptions) DrainNodes(ctx context.Context, key, value string) (providers.Retirement, error) {
	list := &corev1.NodeList{}
	if err := d.r.Client.List(ctx, list, client.MatchingLabels{key: value}); err != nil {
		return providers.Retirement{}, fmt.Errorf("listing the Nodes labelled %s=%s to drain: %w", key, value, err)
	}
	nodes := make([]*corev1.Node, 0, len(list.Items))
	for i := range list.Items {
		nodes = append(nodes, &list.Items[i])
	}
	return d.retireNodes(ctx, nodes, fmt.Sprintf("node(s) labelled %s=%s", key, value), upgrade.MaxUnavailable(d.ig, len(nodes)))
}

// EvictPods evicts the pods labelled key=value (listed from the API
// server, all namespaces). A pod bound to a Node leaves by the drain of
// that Node (an EKS Fargate pod has a Node of its own), so the drain
// runner's eviction and its timeout apply, paced by fargatePace; pods
// EKS placed back on the retiring profile are counted and reported
// (followRepeats); a pod bound to
// none is evicted directly (Drainer.EvictUnbound: it serves nothing, so
// its budget allows it unless the budget is already broken). Finished
// pods do not count. Done when no pod is left.
func (d groupDisruptions) EvictPods(ctx context.Context, key, value string) (providers.Retirement, error) {
	if d.r.Rolling == nil || d.r.Rolling.Drainer == nil {
		return providers.Retirement{Done: true}, nil // no drainer configured (tests of other paths)
	}
	nodes, unbound, err := d.r.Rolling.Drainer.PodNodes(ctx, d.r.Client, key, value)
	if err != nil {
		return providers.Retirement{}, err
	}
	if d.tally == nil {
		d.tally = &retireTally{}
	}
	started := len(d.tally.started)
	pods, err := d.podsOf(ctx, key, value)
	if err != nil {
		return providers.Retirement{}, err
	}
	res, err := d.retireNodes(ctx, nodes, fmt.Sprintf("node(s) of the pods labelled %s=%s", key, value), fargatePace(d.ig, len(nodes)))
	if err == nil {
		d.followRepeats(value, pods, d.tally.started[started:])
	}
	if err != nil || len(unbound) == 0 {
		return res, err
	}
	d.tally.unbound += len(unbound)
	res.Done = false
	res.Message = strings.Join(append(nonEmpty(res.Message), "waiting for pod(s) bound to no node: "+strings.Join(unbound, ", ")), "; ")
	return res, nil
}

// retireNodes advances the drains of nodes (what: how they are named in
// messages) before their cloud resource is deleted: the drains already
// started (cordoned, drain.AnnotationDrainStarted) are polled, and new
// ones are started (drain.Drainer.Start) while fewer than limit are
// undrained (pace). What it saw is added to d.tally. Done once every
// node is drained and, read again from the API server
// (drain.Drainer.Remaining), has no pod left to evict. A drain blocked
// past the drain timeout is in Blocked and is retried by the runner,
// never forced. Errors come from the API server.
func (d groupDisruptions) retireNodes(ctx context.Context, nodes []*corev1.Node, what string, limit int) (providers.Retirement, error) {
	tally := d.tally
	if tally == nil {
		tally = &retireTally{}
	}
	if d.r.Rolling == nil || d.r.Rolling.Drainer == nil {
		return providers.Retirement{Done: true}, nil // no drainer configured (tests of other paths)
	}
	if len(nodes) == 0 {
		return providers.Retirement{Done: true}, nil
	}
	var fresh, undrained []*corev1.Node
	drained := 0
	var blocked, waiting []string
	poll := func(node *corev1.Node) error {
		res, msg, err := d.r.Rolling.Drain(ctx, d.ig, node)
		switch {
		case err != nil:
			return err
		case res == drain.Drained:
			drained++
			return nil
		case res == drain.Blocked:
			blocked = append(blocked, msg)
		case msg != "":
			waiting = append(waiting, node.Name+" ("+msg+")")
		default:
			waiting = append(waiting, node.Name)
		}
		undrained = append(undrained, node)
		return nil
	}
	for _, node := range nodes {
		if _, ok := node.Annotations[drain.AnnotationDrainStarted]; !ok || !node.Spec.Unschedulable {
			fresh = append(fresh, node)
			continue
		}
		if err := poll(node); err != nil {
			return providers.Retirement{}, err
		}
	}
	for _, node := range fresh[:pace(len(undrained), limit, len(fresh))] {
		if err := d.r.Rolling.Drainer.Start(ctx, node, drain.OwnerRetire); err != nil {
			if apierrors.IsNotFound(err) {
				drained++ // gone meanwhile: nothing to drain
				continue
			}
			return providers.Retirement{}, err
		}
		tally.started = append(tally.started, node.Name)
		if err := poll(node); err != nil {
			return providers.Retirement{}, err
		}
	}
	tally.nodes, tally.drained = tally.nodes+len(nodes), tally.drained+drained
	for _, node := range nodes {
		if _, ok := node.Annotations[drain.AnnotationDrainStarted]; ok {
			tally.cordoned = append(tally.cordoned, node.Name)
		}
	}
	for _, node := range undrained {
		tally.draining = append(tally.draining, node.Name)
	}
	if drained == len(nodes) {
		left, err := d.r.undrained(ctx, d.ig, nodes)
		if err != nil {
			return providers.Retirement{}, err
		}
		if len(left) == 0 {
			return providers.Retirement{Done: true}, nil
		}
		return providers.Retirement{Message: fmt.Sprintf("draining %s again: %s", what, strings.Join(left, ", "))}, nil
	}
	msg := fmt.Sprintf("draining %s through the Eviction API, %d at once (maxUnavailable): %d of %d drained", what, limit, drained, len(nodes))
	if len(waiting) > 0 {
		msg += "; draining " + strings.Join(waiting, ", ")
	}
	return providers.Retirement{Message: msg, Blocked: strings.Join(blocked, "; ")}, nil
}

// pace is how many of fresh nodes may start draining now, when undrained
// have started and are not drained yet and at most limit may drain at
// once.
func pace(undrained, limit, fresh int) int {
	return min(fresh, max(0, limit-undrained))
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// managedProgress is the progress of an eks-managed or eks-fargate group
// (Observation.Managed): what the cloud is doing (a replacement's step,
// a version update), or, when the provisioner found a replacement or
// version update needed and Disruptions.Admit refused it, waiting for an
// upgrade slot as an eks group does (condition Upgrading False,
// WaitingForUpgradeSlot). A retirement drain blocked past the drain
// timeout is a Warning Event DrainBlocked, once per distinct set of
// blocking pods (drainBlocks; retried, never forced). The
// slot is released (once the status is written) when nothing is replaced
// or updated any more; the drains of the group are then forgotten.
func (r *Reconciler) managedProgress(ig *v1alpha1.InstanceGroup, obs *providers.Observation, progress upgrade.Progress) (upgrade.Progress, bool) {
	progress.Done, progress.Message = !obs.Updating, obs.Message
	if obs.WaitingForSlot {
		holders := r.Slots.Holders()
		progress.Done, progress.Waiting = false, true
		progress.Message = fmt.Sprintf("waiting for an upgrade slot: %d group(s) rotating (%s); then %s", len(holders), joinKeys(holders), obs.Message)
		if why := r.outsideWindow(ig.Namespace); why != "" {
			progress.OutsideWindow = true
			progress.Message = fmt.Sprintf("waiting to replace: %s; then %s", why, obs.Message)
		}
	}
	key := client.ObjectKeyFromObject(ig)
	if obs.Blocked != "" && r.blocks.announce(key, obs.Blocked) {
		// Once per distinct set of blocking pods: the runner hands the
		// same blockage out again at about every other pass.
		r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDrainBlocked, "Replace", "%s; retrying", obs.Blocked)
	}
	done := !obs.Updating && !obs.WaitingForSlot && len(obs.Retiring) == 0
	if done {
		r.blocks.forget(key)
		r.repeats.forget(key)
	}
	if done && r.Rolling != nil && r.Rolling.Drains != nil {
		r.Rolling.Drains.Cancel(key) // drained nodes whose node group is gone
	}
	return progress, done
}
