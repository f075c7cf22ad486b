package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Event reasons of the rollingUpdate strategy, on the InstanceGroup.
const (
	ReasonRotationBatch = "RotationBatchStarted"
	ReasonNodeDrained   = "NodeDrained"
	ReasonDrainBlocked  = "DrainBlocked"
	// ReasonSurgeAdded: maxSurge capacity was added on top of the desired
	// capacity as it was.
	ReasonSurgeAdded = "SurgeAdded"
	// ReasonSurgeReturned: surge capacity no drifted instance was left to
	// give back went back with a node the rotation chose, drained and
	// terminated with a capacity decrement (Settle).
	ReasonSurgeReturned = "SurgeReturned"
	// ReasonSurgeForgone: recorded surge capacity is not given back (the
	// desired capacity came down to minSize meanwhile, or every instance
	// weighs more than what is left); the record is lowered.
	ReasonSurgeForgone = "SurgeForgone"
	// ReasonSurgeKeptForBalance: a drained surge node was replaced rather
	// than given back, because its zone does not hold the most instances
	// (a decrement there would unbalance the group).
	ReasonSurgeKeptForBalance = "SurgeKeptForBalance"
	// ReasonSurgeAtMinSize: a surge node was terminated without a capacity
	// decrement because the desired capacity was at minSize.
	ReasonSurgeAtMinSize = "SurgeNodeAtMinSize"
	// ReasonInstanceGone: a fresh listing, read before a drained instance
	// was terminated, no longer shows it in the group, or shows it
	// Terminating already.
	ReasonInstanceGone = "InstanceAlreadyGone"
	// ReasonStandbyLeftAlone: a fresh listing, read before a drained
	// instance was terminated, shows it in Standby; it is not terminated.
	ReasonStandbyLeftAlone = "StandbyLeftAlone"
)

// Progress is what a strategy step reports.
type Progress struct {
	// Done is true when no drifted instance is left to replace (Standby
	// ones are left alone) and the last batch's replacements are Ready
	// nodes or forgone.
	Done bool
	// Waiting is true when the rotation has not started for lack of an
	// upgrade slot (--max-concurrent-upgrades).
	Waiting bool
	// OutsideWindow: Waiting because changes may not start now (the
	// boundaries' maintenance windows and freezes).
	OutsideWindow bool
	// StalledAt, with Waiting, is when the group's slot was released
	// because its rotation made no progress (--upgrade-stall-timeout).
	StalledAt time.Time
	// Updated and Total count instances on the latest launch template
	// version and all instances, leaving out instances being terminated
	// (Terminating, Terminating:Wait, Terminating:Proceed): they are
	// leaving the group, and on AWS they can stay listed for minutes
	// (a termination lifecycle hook waits for the node's drain).
	Updated, Total int
	// Stopped is true when the rotation stopped because MaxNeverJoined
	// consecutive replacements never became Ready nodes (see Stopped);
	// Message says why.
	Stopped bool
	// Message says what the rotation is doing or waiting for.
	Message string
}

// Counted returns the Progress of obs's instances so far: Updated and
// Total as documented there, nothing else set.
func Counted(obs *providers.Observation) Progress {
	var p Progress
	for _, in := range obs.Instances {
		if strings.HasPrefix(in.LifecycleState, "Terminating") {
			continue
		}
		p.Total++
		if in.UpToDate {
			p.Updated++
		}
	}
	return p
}

// Leaving returns the ids of obs's drifted instances that are being
// terminated (lifecycle state Terminating*: on AWS a termination hook
// holds them in Terminating:Wait until their node is drained). A
// rotation is not done while any is left: their nodes are still there,
// cordoned, and the group still runs the old launch template version.
func Leaving(obs *providers.Observation) []string {
	var ids []string
	for _, in := range obs.Instances {
		if !in.UpToDate && strings.HasPrefix(in.LifecycleState, "Terminating") {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// leavingMessage says what a rotation with nothing else to do waits for.
func leavingMessage(ids []string) string {
	return fmt.Sprintf("waiting for %d replaced instance(s) to finish terminating: %s", len(ids), strings.Join(ids, ", "))
}

// RollingUpdate rotates drifted instances a batch of maxUnavailable at a
// time: cordon, drain through the Eviction API, terminate in the group
// without decrementing its capacity, and wait until the batch's own
// replacements (status.rotationBatch: the instances launched for it, by
// id) are Ready nodes before the next batch. After MaxNeverJoined
// consecutive replacements that never joined, the rotation stops. Its
// state is in the cloud (instance states), on the nodes (drain
// annotations) and in the group's status (surge and batch records), so a
// restarted controller continues where it stopped.
type RollingUpdate struct {
	Drainer *drain.Drainer
	// Drains, when set, runs the drains in the background (a Step never
	// waits for evictions); nil runs each drain step inline, bounded by
	// drain.Drainer.Step (tests).
	Drains   *drain.Drains
	Recorder events.EventRecorder
	// Client persists status.surgeCapacity before each cloud call that
	// adds or gives back surge capacity, so the record survives a lost
	// status write or a restart.
	Client client.Client
	// Reader reads the surge record from the API server (not the cache,
	// which may not have seen the last write yet: acting on a stale record
	// would surge twice or give a surge back twice). Default: Client.
	Reader client.Reader

	// warned holds the instances ReasonTerminationHeld was emitted for.
	warned sync.Map
}

// Step advances the rotation of ig by what can be done now and returns
// the progress. nodes maps providerID to the group's Nodes. Drifted
// instances in Standby are left alone (the message names them). The
// rotation is done once no drifted instance is left to replace or leaving
// (see left), no surge is left to give back, and the last batch's
// replacements are Ready nodes or forgone (judgeBatch); it may stop there
// too. Errors come from the API server or the cloud; a blocked drain is
// not an error (an Event reports it and the node is skipped for now).
func (r *RollingUpdate) Step(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator) (Progress, error) {
	drifted, standby := driftedOf(obs)
	p, err := r.step(ctx, ig, obs, nodes, rot, drifted)
	if note := standbyNote(standby); note != "" {
		p.Message = strings.TrimPrefix(p.Message+note, "; ")
	}
	return p, err
}

func (r *RollingUpdate) step(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, drifted []providers.Instance) (Progress, error) {
	p := Counted(obs)
	surge, err := r.outstandingSurge(ctx, ig, obs)
	if err != nil {
		return p, err
	}
	r.warnHeld(ig, obs, nodes)
	leaving := leavingNow(obs, nodes, r.Drainer.Now())
	if len(drifted) == 0 && surge == 0 && ig.Status.SurgeBaseCapacity == 0 && !GivingBack(obs, nodes) {
		if len(leaving) > 0 {
			p.Message = leavingMessage(leaving)
			return p, nil
		}
		// The last batch is judged like the others: not done (the slot is
		// kept) until its replacements are Ready nodes, and it may stop.
		last, err := r.judgeBatch(ctx, ig, obs, nodes, r.Drainer.Now())
		if err != nil || last.stopped != "" || last.waiting != "" {
			p.Stopped, p.Message = last.stopped != "", last.stopped+last.waiting
			return p, err
		}
		p.Done = true
		if r.Drains != nil {
			r.Drains.Cancel(client.ObjectKeyFromObject(ig)) // the last batch's drained nodes
		}
		return p, nil
	}
	// The batch in flight is judged by its own replacements: joined, still
	// coming, or never joined (at MaxNeverJoined the rotation stops and
	// nothing more is drained or terminated).
	batchState, err := r.judgeBatch(ctx, ig, obs, nodes, r.Drainer.Now())
	if err != nil {
		return p, err
	}
	if batchState.stopped != "" {
		p.Stopped, p.Message = true, batchState.stopped
		return p, nil
	}
	if len(drifted) == 0 || GivingBack(obs, nodes) {
		// Surge no drifted instance is left to give back (Settle), or a
		// give-back under way, which finishes before the next batch (the
		// drifted instances take the rest of the surge). The rotation is
		// done once the surge is all given back.
		p.Message, err = r.settle(ctx, ig, obs, nodes, rot, len(drifted) == 0)
		if err != nil || p.Message != "" || len(drifted) == 0 {
			p.Done = err == nil && p.Message == "" && len(drifted) == 0
			if p.Done && len(leaving) > 0 {
				p.Done, p.Message = false, leavingMessage(leaving)
			}
			if p.Done && batchState.waiting != "" {
				p.Done, p.Message = false, batchState.waiting
			}
			return p, err
		}
		if surge, err = r.outstandingSurge(ctx, ig, obs); err != nil {
			return p, err
		}
	}
	// Rotation order: drifted instances that serve nothing already (no
	// node, a node not Ready, or unhealthy in Auto Scaling) first, so they
	// are replaced first and use up maxUnavailable (or the surge) before
	// any Ready node is cordoned; then by id, so a restarted controller
	// picks the same ones.
	sort.Slice(drifted, func(i, j int) bool {
		if a, b := unavailable(drifted[i], nodes), unavailable(drifted[j], nodes); a != b {
			return a
		}
		return drifted[i].ID < drifted[j].ID
	})

	zones := newZoneCount(members(obs))
	if p.Message, surge, err = r.finishInflight(ctx, ig, obs, nodes, rot, drifted, surge, zones); err != nil || p.Message != "" {
		return p, err
	}
	if p.Message = batchWait(obs, nodes, batchState.waiting, r.Drainer.Now()); p.Message != "" {
		return p, nil
	}
	return r.startBatch(ctx, ig, obs, nodes, rot, p, drifted, surge, zones)
}

// finishInflight is the rotation's step 1: it finishes the batch in
// flight, terminating the drifted instances whose nodes are drained (surge
// says how much capacity a decrement still gives back; the updated value is
// returned) and skipping those a PodDisruptionBudget blocks. It returns
// "draining …" while any drain of the batch goes on, else "".
//
// A surge node gives its capacity back (a decrement) only from a zone
// holding the most instances, so the group stays balanced; elsewhere (the
// surge landed where no drifted instance is left) it is replaced, in the
// zone Auto Scaling balances, and the surge waits for a later batch or
// Settle.
func (r *RollingUpdate) finishInflight(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, drifted []providers.Instance, surge int, zones zoneCount) (string, int, error) {
	var inflight, polled []string
	for _, in := range drifted {
		node := nodes[in.ProviderID]
		if node == nil || !drain.Marked(node) {
			continue
		}
		polled = append(polled, node.Name)
		res, msg, err := r.Drain(ctx, ig, node)
		if err != nil {
			return "", surge, err
		}
		switch res {
		case drain.Drained:
			if surge, err = r.terminateBalanced(ctx, ig, obs, in, node.Annotations[drain.AnnotationSurge] == "true", surge, rot, zones); err != nil {
				return "", surge, err
			}
			if err := r.markTerminated(ctx, node); err != nil {
				return "", surge, err
			}
			r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonNodeDrained, "Rotate",
				"Node %s drained; instance %s terminated for replacement", node.Name, in.ID)
			inflight = append(inflight, node.Name+" (terminating)")
		case drain.Blocked:
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDrainBlocked, "Rotate",
				"%s; the node is uncordoned and skipped for now", msg)
			// Only the rotation's own drain is given back; a node an
			// interruption or a termination drains stays cordoned.
			if _, err := r.Drainer.Release(ctx, node, drain.OwnerRotation, drain.OwnerSurge); err != nil {
				return "", surge, err
			}
		default:
			inflight = append(inflight, node.Name)
		}
	}
	if r.Drains != nil {
		// drain.Drains of nodes no longer drifted or draining (terminated,
		// uncordoned by hand) stop.
		r.Drains.Retain(client.ObjectKeyFromObject(ig), polled)
	}
	if len(inflight) > 0 {
		return "draining " + strings.Join(inflight, ", "), surge, nil
	}
	return "", surge, nil
}

// batchWait is the rotation's step 2: what the next batch waits for, or ""
// when it may start. batchWaiting is the previous batch's own judgement
// (judgeBatch); a hold in obs also waits.
//
// Wait until the previous batch's own replacements are Ready nodes
// (a replacement removed before it joined, with a decrement or not,
// does not count: the batch waits for another), then until every
// instance on the latest version is a Ready node and the group holds
// its desired capacity (in capacity units: with weights, Desired
// counts units, as Auto Scaling does).
func batchWait(obs *providers.Observation, nodes map[string]*corev1.Node, batchWaiting string, now time.Time) string {
	if batchWaiting != "" {
		return batchWaiting
	}
	waiting := 0
	inService := 0
	for _, in := range obs.Instances {
		if left(in, nodes, now) || providers.Standby(in) {
			continue
		}
		if strings.HasPrefix(in.LifecycleState, "Terminating") || !in.InService() {
			waiting++
			continue
		}
		inService += in.Units()
		if node := nodes[in.ProviderID]; in.UpToDate && (node == nil || !drain.NodeReady(node)) {
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return fmt.Sprintf("waiting for %d replacement instance(s) to become Ready nodes", waiting)
	case inService < obs.Desired:
		return fmt.Sprintf("waiting for %d capacity unit(s) of replacement instances to come into service (desired capacity %d, in service %d)",
			obs.Desired-inService, obs.Desired, inService)
	}
	return obs.Hold // a hold (a closing window) starts no new batch
}

// startBatch is the rotation's step 3: it starts the next batch. With
// maxSurge, first add capacity on top of the desired capacity as it is now
// and let the surge instances become Ready nodes; the batch that follows
// drains old instances worth that capacity and terminates them with a
// decrement, giving back exactly what the surge added: capacity never
// drops below the desired capacity, and whatever others (the
// cluster-autoscaler) set meanwhile is kept.
func (r *RollingUpdate) startBatch(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, p Progress, drifted []providers.Instance, surge int, zones zoneCount) (Progress, error) {
	var err error
	surging := surge > 0
	batchSize := MaxUnavailable(ig, obs.Desired)
	switch {
	case surging:
		batchSize = surge // the surge instances are Ready: drain as much old capacity
	case MaxSurge(ig, obs.Desired, obs.Max) > 0:
		if want := surgeFor(pick(drifted, MaxSurge(ig, obs.Desired, obs.Max))); want > 0 && want <= obs.Max-obs.Desired {
			return r.startSurge(ctx, ig, obs, p, want, rot)
		}
		// No room under maxSize for a whole instance: this batch goes by
		// maxUnavailable.
	}
	// The batch holds drifted instances worth at most batchSize capacity
	// units (at least one instance, even one that weighs more). Instances
	// terminated with a decrement (surging) are picked Availability Zone by
	// Availability Zone (zoneBalancer), so the group stays balanced and
	// Auto Scaling has nothing to rebalance; the others are replaced in the
	// zone Auto Scaling balances, so they go in rotation order.
	var next func(ok func(providers.Instance) bool) (providers.Instance, bool)
	if surging {
		next = newZoneBalancer(members(obs), drifted, nodes).next
	} else {
		order := drifted
		next = func(func(providers.Instance) bool) (providers.Instance, bool) {
			if len(order) == 0 {
				return providers.Instance{}, false
			}
			in := order[0]
			order = order[1:]
			return in, true
		}
	}
	var batch []string
	var skipped []string
	units := 0
	for units < batchSize {
		in, ok := next(func(in providers.Instance) bool {
			node := nodes[in.ProviderID]
			return units+in.Units() <= batchSize && (node == nil || !r.Drainer.Skipped(node))
		})
		if !ok {
			break
		}
		if (units > 0 || surging) && units+in.Units() > batchSize {
			continue // too heavy for what is left; a lighter one may fit
		}
		node := nodes[in.ProviderID]
		if node == nil {
			// Never joined: nothing to drain.
			if surge, err = r.terminateBalanced(ctx, ig, obs, in, surging, surge, rot, zones); err != nil {
				return p, err
			}
			batch = append(batch, in.ID)
			units += in.Units()
			continue
		}
		if r.Drainer.Skipped(node) {
			skipped = append(skipped, node.Name)
			continue
		}
		owner := drain.OwnerRotation
		if surging {
			owner = drain.OwnerSurge
		}
		if err := r.Drainer.Start(ctx, node, owner); err != nil {
			return p, err
		}
		if r.Drains != nil {
			r.Drains.Poll(ctx, client.ObjectKeyFromObject(ig), node) // queue it now, not at the next pass
		}
		batch = append(batch, node.Name)
		units += in.Units()
	}
	if surging {
		// The balancer passes over skipped nodes: name them.
		for _, in := range drifted {
			if node := nodes[in.ProviderID]; node != nil && r.Drainer.Skipped(node) {
				skipped = append(skipped, node.Name)
			}
		}
	}
	if len(batch) == 0 && surging && len(skipped) == 0 {
		// No drifted instance is light enough to give the surge back (the
		// ones it was for went meanwhile): give it back by draining other
		// nodes (Settle).
		p.Message, err = r.Settle(ctx, ig, obs, nodes, rot)
		return p, err
	}
	if len(batch) == 0 {
		p.Message = "every remaining drifted node is blocked by a PodDisruptionBudget and skipped for now: " + strings.Join(skipped, ", ")
		return p, nil
	}
	r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonRotationBatch, "Rotate",
		"Rotating %s (%d of %d drifted, %d capacity unit(s) of at most %d)", strings.Join(batch, ", "), len(batch), len(drifted), units, batchSize)
	p.Message = "draining " + strings.Join(batch, ", ")
	return p, nil
}

// Drain advances the drain of node, a node of ig cordoned with
// drain.Drainer.Start: through drain.Drains (it starts the drain or reads its state,
// never waiting), or with one inline drain.Drainer.Drain step when drain.Drains is
// nil. Results and errors are drain.Drainer.Drain's.
func (r *RollingUpdate) Drain(ctx context.Context, ig *v1alpha1.InstanceGroup, node *corev1.Node) (drain.DrainResult, string, error) {
	if r.Drains != nil {
		return r.Drains.Poll(ctx, client.ObjectKeyFromObject(ig), node)
	}
	return r.Drainer.Drain(ctx, node)
}

// unavailable reports whether an instance serves no capacity now: no
// node, a node not Ready, or unhealthy in the cloud.
func unavailable(in providers.Instance, nodes map[string]*corev1.Node) bool {
	node := nodes[in.ProviderID]
	return node == nil || !drain.NodeReady(node) || !in.Healthy
}

// pick returns the leading drifted instances (in rotation order) worth at
// most units capacity units, skipping heavier ones; at least the first one
// when none fits.
func pick(drifted []providers.Instance, units int) []providers.Instance {
	var out []providers.Instance
	sum := 0
	for _, in := range drifted {
		if sum > 0 && sum+in.Units() > units {
			continue
		}
		out = append(out, in)
		sum += in.Units()
		if sum >= units {
			break
		}
	}
	return out
}

// surgeFor is the capacity a surge adds to replace batch: its units.
func surgeFor(batch []providers.Instance) int { return providers.Capacity(batch, nil) }

// startSurge records that the rollout adds want capacity units, then adds
// them to the desired capacity as it is now (Rotator.AddCapacity). The
// record comes first: a crash between the two leaves a record of capacity
// that was never added, which the next batch drains with decrements
// (capacity dips by at most want, as with maxUnavailable); the reverse
// order could add capacity that is never given back.
func (r *RollingUpdate) startSurge(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation, p Progress, want int, rot providers.Rotator) (Progress, error) {
	if err := r.recordSurge(ctx, ig, want); err != nil {
		return p, err
	}
	asked := r.Drainer.Now()
	added, err := rot.AddCapacity(ctx, ig, want)
	if err != nil {
		// The record stays: the call may have taken effect with its answer
		// lost (a reset connection). A record of capacity never added costs
		// a dip of at most want; dropping one that was added would keep the
		// surge for ever.
		return p, fmt.Errorf("scaling out by maxSurge %d: %w", want, err)
	}
	if added != want {
		// The group reached maxSize meanwhile (someone else scaled out).
		if err := r.recordSurge(ctx, ig, max(added, 0)); err != nil {
			return p, err
		}
	}
	// The surge instances are the batch's replacements: it drains nothing
	// until they are Ready nodes.
	if err := r.owe(ctx, ig, obs, added, asked); err != nil {
		return p, err
	}
	r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeAdded, "Rotate",
		"Added %d capacity unit(s) for maxSurge on top of the desired capacity as it was; they are given back as old instances go", added)
	p.Message = fmt.Sprintf("launching %d capacity unit(s) of surge before draining", added)
	return p, nil
}

// terminateDrained terminates the instance of a drained node (or of one
// that never joined). An instance replaced by a surge (surged: its node
// was drained for one) gives its capacity back (a terminate with a
// decrement) while surge, the capacity the surge added and has not given
// back, covers its weight; the record is lowered first (see startSurge).
// At minSize the decrement is refused (the cluster-autoscaler scaled in
// meanwhile): the instance is then terminated without a decrement, so a
// replacement keeps the group at its minimum and minSize is never lowered;
// the cluster-autoscaler's scale-in took the surge back. It returns what
// is left of surge and whether the desired capacity was decremented.
func (r *RollingUpdate) terminateDrained(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	in providers.Instance, surged bool, surge int, rot providers.Rotator) (int, bool, error) {
	// The pass judged from the shared listing, which may predate someone
	// else's termination (the cluster-autoscaler's scale in, a spot
	// interruption): an instance no longer in the group is not terminated
	// (nor is a replacement owed for it). One fresh listing per termination.
	// One already Terminating* (a scale-in, a health replacement) is gone
	// too: terminating it again would owe a replacement for a capacity
	// drop made with a decrement. One put in Standby meanwhile is left
	// alone: terminating it without a decrement launches nothing.
	if now, ok, err := providers.Relist(ctx, ig, rot); err != nil {
		return surge, false, fmt.Errorf("re-reading the group before terminating drained instance %s: %w", in.ID, err)
	} else if fresh, there := now[in.ID]; ok && !there {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonInstanceGone, "Rotate",
			"Instance %s left the Auto Scaling group before the rotation terminated it (terminated by someone else)", in.ID)
		return surge, false, nil
	} else if ok && strings.HasPrefix(fresh.LifecycleState, "Terminating") {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonInstanceGone, "Rotate",
			"Instance %s is already %s (terminated by someone else): the rotation does not terminate it again and owes no replacement for it", in.ID, fresh.LifecycleState)
		return surge, false, nil
	} else if ok && providers.Standby(fresh) {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonStandbyLeftAlone, "Rotate",
			"Instance %s entered Standby before the rotation terminated it: it is left alone (Auto Scaling would launch no replacement for it)", in.ID)
		return surge, false, nil
	}
	decrement := surged && surge >= in.Units()
	atMin := func() {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeAtMinSize, "Rotate",
			"The desired capacity is at minSize %d (scaled in during the surge): instance %s is terminated without a capacity decrement and replaced; minSize is not lowered", obs.Min, in.ID)
	}
	if decrement && obs.Desired-in.Units() < obs.Min {
		decrement = false // at minSize: see above
		surge -= in.Units()
		if err := r.recordSurge(ctx, ig, surge); err != nil {
			return surge, false, err
		}
		atMin()
	}
	if decrement {
		// The give-back is marked before the call and settled after it; a
		// stop in between is resolved from the instance's state
		// (resolveSurgeReturn), so the capacity goes back exactly once.
		ret := &v1alpha1.SurgeReturn{InstanceID: in.ID, Capacity: in.Units()}
		if err := r.writeSurge(ctx, ig, surge, ret); err != nil {
			return surge, false, err
		}
		err := rot.Terminate(ctx, ig, in.ID, true)
		if err == nil {
			return surge - in.Units(), true, r.recordSurge(ctx, ig, surge-in.Units())
		}
		if !errors.Is(err, providers.ErrDesiredAtMinSize) {
			// Left marked: whether the call took effect is read from the
			// instance's state on the next pass.
			return surge, false, fmt.Errorf("terminating drained instance %s: %w", in.ID, err)
		}
		surge -= in.Units() // at minSize, found by the cloud: see above
		if err := r.recordSurge(ctx, ig, surge); err != nil {
			return surge, false, err
		}
		atMin()
	}
	asked := r.Drainer.Now()
	if err := rot.Terminate(ctx, ig, in.ID, false); err != nil {
		return surge, false, fmt.Errorf("terminating drained instance %s: %w", in.ID, err)
	}
	// Auto Scaling launches a replacement: the batch waits for it.
	return surge, false, r.owe(ctx, ig, obs, in.Units(), asked)
}

// outstandingSurge is status.surgeCapacity as stored in the API server
// (into ig too), converting a record of an earlier version
// (status.surgeBaseCapacity, the desired capacity before the surge) once.
func (r *RollingUpdate) outstandingSurge(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation) (int, error) {
	if ru := ig.Spec.Strategy.RollingUpdate; (ru == nil || ru.MaxSurge == nil) && ig.Status.SurgeCapacity == 0 && ig.Status.SurgeBaseCapacity == 0 {
		// No surge configured nor recorded: nothing to read. (Records are
		// only written with maxSurge set, and a spec change that removes it
		// reaches the cache after the record it followed.)
		return 0, nil
	}
	return r.storedSurge(ctx, ig, obs)
}

// resolveSurgeReturn settles a give-back a stopped controller left marked
// (status.surgeReturn): if its instance is still in the group and not
// terminating, the termination with a decrement did not happen and the
// mark is dropped (the drained node is terminated again in this pass);
// otherwise the capacity went back and the record is lowered by it.
func (r *RollingUpdate) resolveSurgeReturn(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation) error {
	ret := ig.Status.SurgeReturn
	if ret == nil {
		return nil
	}
	for _, in := range obs.Instances {
		if in.ID == ret.InstanceID && !strings.HasPrefix(in.LifecycleState, "Terminating") {
			return r.recordSurge(ctx, ig, ig.Status.SurgeCapacity)
		}
	}
	return r.recordSurge(ctx, ig, max(ig.Status.SurgeCapacity-ret.Capacity, 0))
}

// readSurge sets ig's surge record to the one stored in the API server.
func (r *RollingUpdate) readSurge(ctx context.Context, ig *v1alpha1.InstanceGroup) error {
	cur := &v1alpha1.InstanceGroup{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
		return fmt.Errorf("reading the surge record: %w", err)
	}
	ig.Status.SurgeCapacity, ig.Status.SurgeBaseCapacity = cur.Status.SurgeCapacity, cur.Status.SurgeBaseCapacity
	ig.Status.SurgeReturn = cur.Status.SurgeReturn
	return nil
}

func (r *RollingUpdate) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// recordSurge writes status.surgeCapacity = surge to the API server
// (retrying on conflicts; clearing the field of earlier versions) and
// into ig.
func (r *RollingUpdate) recordSurge(ctx context.Context, ig *v1alpha1.InstanceGroup, surge int) error {
	return r.writeSurge(ctx, ig, surge, nil)
}

// writeSurge writes status.surgeCapacity = surge and status.surgeReturn =
// ret (nil clears it) to the API server, retrying on conflicts and
// clearing the field of earlier versions, and into ig.
func (r *RollingUpdate) writeSurge(ctx context.Context, ig *v1alpha1.InstanceGroup, surge int, ret *v1alpha1.SurgeReturn) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err
		}
		if cur.Status.SurgeCapacity == surge && cur.Status.SurgeBaseCapacity == 0 && equality.Semantic.DeepEqual(cur.Status.SurgeReturn, ret) {
			return nil
		}
		cur.Status.SurgeCapacity, cur.Status.SurgeBaseCapacity, cur.Status.SurgeReturn = surge, 0, ret
		return r.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("recording the surge capacity: %w", err)
	}
	ig.Status.SurgeCapacity, ig.Status.SurgeBaseCapacity, ig.Status.SurgeReturn = surge, 0, ret
	return nil
}

// MaxUnavailable resolves spec.strategy.rollingUpdate.maxUnavailable
// against desired capacity: a count, or a percentage rounded down, and at
// least 1. Default 1.
func MaxUnavailable(ig *v1alpha1.InstanceGroup, desired int) int {
	ru := ig.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// MaxSurge resolves spec.strategy.rollingUpdate.maxSurge against desired
// capacity: a count, or a percentage rounded up; capped so desired + surge
// stays within max. Default 0.
func MaxSurge(ig *v1alpha1.InstanceGroup, desired, max int) int {
	ru := ig.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxSurge == nil {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
	if err != nil || n < 0 {
		return 0
	}
	return min(n, max-desired)
}
