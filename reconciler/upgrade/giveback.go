package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Settle gives back the surge capacity no drifted instance is left to
// give back (status.surgeCapacity after the rotation's last batch: its old
// instances went before the surge batch drained them, e.g. scaled in by
// the cluster-autoscaler, or none is light enough). It never lowers the
// desired capacity itself, which would let Auto Scaling pick the
// instances to terminate, undrained: it chooses nodes of the group
// (zoneBalancer: from the Availability Zone holding the most instances,
// so the group stays balanced), cordons them with drain.AnnotationSurge, drains
// them through the drain runner (Eviction API, PodDisruptionBudgets), and
// terminates each drained node's instance with a capacity decrement
// (Rotator.Terminate; terminateDrained). A group whose desired capacity
// is at minSize gives back nothing: the surge went with a scale-in, and
// the record is lowered so that minSize is never crossed.
//
// A give-back takes several passes; its state is durable: the record
// (lowered, exactly once, as each instance goes, see terminateDrained)
// and the nodes' drain annotations, so a restarted controller finds the
// nodes it was draining and goes on. nodes maps providerID to the group's
// Nodes. It returns what it is doing, "" once no surge is left to give
// back; errors come from the API server or the cloud. Step calls it when
// no drifted instance can take the surge; the reconciler when a group has
// no drift but a surge record or a give-back under way.
func (r *RollingUpdate) Settle(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator) (string, error) {
	return r.settle(ctx, ig, obs, nodes, rot, true)
}

// settle is Settle; with more false it only finishes the give-back drains
// under way (drifted instances are left to take the rest of the surge)
// and returns "" once none is.
func (r *RollingUpdate) settle(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, more bool) (string, error) {
	surge, err := r.storedSurge(ctx, ig, obs)
	if err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(ig)
	if rot == nil {
		// A provisioner that cannot terminate instances never surged.
		return "", r.recordSurge(ctx, ig, 0)
	}
	if room := max(obs.Desired-obs.Min, 0); surge > room {
		// The cluster-autoscaler (or a person) scaled in meanwhile: only
		// room is left above minSize.
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeForgone, "Rotate",
			"%d of %d capacity unit(s) of surge are not given back: the desired capacity %d is that close to minSize %d (scaled in meanwhile)",
			surge-room, surge, obs.Desired, obs.Min)
		surge = room
		if err := r.recordSurge(ctx, ig, surge); err != nil {
			return "", err
		}
	}
	mem := members(obs)
	sort.Slice(mem, func(i, j int) bool { return mem[i].ID < mem[j].ID })
	current := *obs // Desired follows this pass's decrements
	obs = &current

	g := &givebackPass{surge: surge}
	if err := r.givebackInflight(ctx, ig, obs, nodes, rot, mem, g); err != nil {
		return "", err
	}

	// More nodes to drain, once no instance is launching (a surge
	// instance not in service yet is not given back before it serves)
	// and the last batch's own replacements are Ready nodes (a surge node
	// replaced for balance, SurgeKeptForBalance, included).
	gate := ""
	if more && g.surge-g.held > 0 {
		v, err := r.judgeBatch(ctx, ig, obs, nodes, r.Drainer.Now())
		if err != nil {
			return "", err
		}
		gate = v.waiting + v.stopped
	}
	want := g.surge - g.held
	launching := 0
	for _, in := range mem {
		if strings.HasPrefix(in.LifecycleState, "Pending") {
			launching++
		}
	}
	if want > 0 && launching == 0 && more && gate == "" {
		if err := r.givebackMore(ctx, ig, obs, nodes, rot, mem, want, g); err != nil {
			return "", err
		}
	}
	if r.Drains != nil {
		r.Drains.Retain(key, g.polled)
	}
	surge = g.surge
	switch {
	case surge == 0:
		return "", r.recordSurge(ctx, ig, 0) // clears a converted record too
	case len(g.doing) > 0:
		return fmt.Sprintf("giving back %d capacity unit(s) of surge: draining %s", surge, strings.Join(g.doing, ", ")), nil
	case !more:
		return "", nil
	case launching > 0:
		return fmt.Sprintf("giving back %d capacity unit(s) of surge once %d launching instance(s) are in service", surge, launching), nil
	case gate != "":
		return fmt.Sprintf("giving back %d capacity unit(s) of surge after the last batch: %s", surge, gate), nil
	case g.held == 0 && !g.fits:
		// Every instance weighs more than what is left: giving one back
		// would take capacity others want. The cluster-autoscaler, which
		// drains before it scales in, may take it.
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeForgone, "Rotate",
			"%d capacity unit(s) of surge are not given back: every instance weighs more; the cluster-autoscaler may scale the group in", surge)
		return "", r.recordSurge(ctx, ig, 0)
	default:
		return fmt.Sprintf("giving back %d capacity unit(s) of surge: every candidate node is blocked by a PodDisruptionBudget and skipped for now: %s",
			surge, strings.Join(g.blocked, ", ")), nil
	}
}

// givebackPass is what one pass of settle has done so far.
type givebackPass struct {
	surge   int      // capacity units of surge still to give back (the record)
	held    int      // capacity units being drained
	polled  []string // nodes whose drains the runner keeps (drain.Drains.Retain)
	doing   []string // what the message names as under way
	blocked []string // candidates a PodDisruptionBudget blocks (skipped)
	fits    bool     // some candidate weighs no more than what is left
}

// givebackInflight polls the give-back drains under way (mem sorted by
// id): a drained node's instance is terminated with a decrement (giveBack),
// a blocked one uncordoned and skipped, and one no longer to give back
// (the record went down) uncordoned.
func (r *RollingUpdate) givebackInflight(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, mem []providers.Instance, g *givebackPass) error {
	for _, in := range mem {
		node := nodes[in.ProviderID]
		if node == nil || !givingBack(node) {
			continue
		}
		if in.Units() > g.surge-g.held {
			// No longer to give back (the record went down): uncordon.
			if err := r.release(ctx, ig, node); err != nil {
				return err
			}
			continue
		}
		res, msg, err := r.Drain(ctx, ig, node)
		if err != nil {
			return err
		}
		switch res {
		case drain.Drained:
			if g.surge, err = r.giveBack(ctx, ig, obs, in, node.Name, g.surge, rot); err != nil {
				return err
			}
			g.doing = append(g.doing, node.Name+" (terminating)")
		case drain.Blocked:
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDrainBlocked, "Rotate",
				"%s; the node is uncordoned and skipped for now (giving back surge)", msg)
			if _, err := r.Drainer.Release(ctx, node, drain.OwnerRotation, drain.OwnerSurge); err != nil {
				return err
			}
		default:
			g.held += in.Units()
			g.polled = append(g.polled, node.Name)
			g.doing = append(g.doing, node.Name)
		}
	}
	return nil
}

// givebackMore starts drains of in-service nodes worth at most want
// capacity units, zone by zone (zoneBalancer), so the group stays
// balanced; an instance that never joined is terminated at once.
func (r *RollingUpdate) givebackMore(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator, mem []providers.Instance, want int, g *givebackPass) error {
	var candidates []providers.Instance
	for _, in := range mem {
		node := nodes[in.ProviderID]
		if !in.InService() || (node != nil && drain.Marked(node)) {
			continue
		}
		if in.Units() <= want {
			g.fits = true
		}
		if node != nil && r.Drainer.Skipped(node) {
			g.blocked = append(g.blocked, node.Name)
			continue
		}
		candidates = append(candidates, in)
	}
	bal := newZoneBalancer(mem, candidates, nodes)
	taken := 0
	for {
		in, ok := bal.next(func(in providers.Instance) bool { return in.Units() <= want-taken })
		if !ok {
			return nil
		}
		taken += in.Units()
		node := nodes[in.ProviderID]
		if node == nil {
			// Never joined: nothing to drain.
			var err error
			if g.surge, err = r.giveBack(ctx, ig, obs, in, "", g.surge, rot); err != nil {
				return err
			}
			g.doing = append(g.doing, in.ID+" (never joined, terminating)")
			continue
		}
		if err := r.Drainer.Start(ctx, node, drain.OwnerSurge); err != nil {
			return err
		}
		if r.Drains != nil {
			r.Drains.Poll(ctx, client.ObjectKeyFromObject(ig), node) // queue it now, not at the next pass
		}
		g.held += in.Units()
		g.polled = append(g.polled, node.Name)
		g.doing = append(g.doing, node.Name)
	}
}

// giveBack terminates in (its node, if named, drained) with a capacity
// decrement to give back surge, lowering obs.Desired by what went, and
// says so in an Event. It returns what is left of surge (terminateDrained).
func (r *RollingUpdate) giveBack(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	in providers.Instance, node string, surge int, rot providers.Rotator) (int, error) {
	left, decremented, err := r.terminateDrained(ctx, ig, obs, in, true, surge, rot)
	if err != nil {
		return left, err
	}
	what := "instance " + in.ID + " (never joined)"
	if node != "" {
		what = "node " + node + " drained; instance " + in.ID
	}
	if decremented {
		obs.Desired -= in.Units()
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeReturned, "Rotate",
			"Gave back %d capacity unit(s) of surge: %s in %s terminated with a capacity decrement (%d unit(s) left to give back)",
			in.Units(), what, in.Zone(), left)
	}
	return left, nil
}

// terminateBalanced is terminateDrained for the rotation's batches: a
// surge node (surged) outside the fullest zones is terminated without a
// decrement (replaced), so that the group stays balanced; zones counts
// the group's instances and follows the decrements made.
func (r *RollingUpdate) terminateBalanced(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	in providers.Instance, surged bool, surge int, rot providers.Rotator, zones zoneCount) (int, error) {
	if surged && !zones.fullest(in.Zone()) {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeKeptForBalance, "Rotate",
			"Instance %s is replaced, not given back: %s does not hold the most instances of the group, a decrement there would unbalance it (the surge goes back later from the fullest zone)",
			in.ID, in.Zone())
		surged = false
	}
	left, decremented, err := r.terminateDrained(ctx, ig, obs, in, surged, surge, rot)
	if decremented {
		zones[in.Zone()]--
	}
	return left, err
}

// release stops the give-back drain of node and uncordons it
// (drain.GiveBack), with an Event; a node whose drain another owner
// took over (an interruption, a termination) is left to it.
func (r *RollingUpdate) release(ctx context.Context, ig *v1alpha1.InstanceGroup, node *corev1.Node) error {
	released, err := drain.GiveBack(ctx, r.Drains, r.Drainer, node, drain.OwnerRotation, drain.OwnerSurge)
	if err != nil || !released {
		return err
	}
	r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonSurgeForgone, "Rotate",
		"Node %s uncordoned: the surge it was drained to give back is no longer recorded", node.Name)
	return nil
}

// givingBack reports whether node is being drained to give surge back.
func givingBack(node *corev1.Node) bool {
	return drain.Marked(node) && node.Annotations[drain.AnnotationSurge] == "true"
}

// GivingBack reports whether a node of an up-to-date instance of obs is
// being drained to give surge back (Settle), so the reconciler calls
// Settle for a group without drift even when its cached status shows no
// surge record.
func GivingBack(obs *providers.Observation, nodes map[string]*corev1.Node) bool {
	for _, in := range members(obs) {
		if node := nodes[in.ProviderID]; in.UpToDate && node != nil && givingBack(node) {
			return true
		}
	}
	return false
}

// storedSurge is status.surgeCapacity as stored in the API server (into
// ig too), a give-back left marked by a stopped controller settled and a
// record of an earlier version (status.surgeBaseCapacity, the desired
// capacity before the surge) converted once.
func (r *RollingUpdate) storedSurge(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation) (int, error) {
	if err := r.readSurge(ctx, ig); err != nil {
		return 0, err
	}
	if err := r.resolveSurgeReturn(ctx, ig, obs); err != nil {
		return 0, err
	}
	if base := ig.Status.SurgeBaseCapacity; base > 0 {
		surge := ig.Status.SurgeCapacity
		if surge == 0 {
			surge = max(obs.Desired-base, 0)
		}
		if err := r.recordSurge(ctx, ig, surge); err != nil {
			return 0, err
		}
	}
	return ig.Status.SurgeCapacity, nil
}
