package main

import (
	"container/heap"
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/rollout"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// fleetInputs are one simulated fleet rollout: its size, the rollout
// policy and cap, and the durations AWS and Kubernetes contribute.
type fleetInputs struct {
	// Groups of NodesPerGroup nodes each, spread over Namespaces
	// namespaces team-0 … (group i in team-(i mod Namespaces)).
	Groups, NodesPerGroup, Namespaces int
	// MaxUnavailable is every group's spec.strategy.rollingUpdate.
	// maxUnavailable (a count).
	MaxUnavailable int
	// Cap is the boundary ConfigMap's rollout.maxConcurrentUpgrades.
	Cap int
	// Policy is the rollout key's waves, soak and failure (YAML, without
	// maxConcurrentUpgrades).
	Policy string
	// Drain is the evicted pods' grace period
	// (terminationGracePeriodSeconds): how long a drain takes.
	Drain time.Duration
	// Terminate is how long a terminated instance stays Terminating
	// before Auto Scaling launches its replacement.
	Terminate time.Duration
	// Launch is from an instance's launch until it is InService; Join
	// from then until its Node is Ready.
	Launch, Join time.Duration
	// Fanout is the re-admission of one group moved to the new revision
	// (groups of a wave move one after the other).
	Fanout time.Duration
	// React is from a reconcile's own write (a cordon, a termination)
	// to the reconcile it triggers.
	React time.Duration
	// RolloutEvery is how often at most the rollout's step runs while
	// groups change (the model's resolution of wave decisions).
	RolloutEvery time.Duration
	// Limit bounds the virtual time.
	Limit time.Duration
}

// fleetResult is what a simulated rollout measured.
type fleetResult struct {
	// Elapsed is from the new revision to the rollout's completion.
	Elapsed time.Duration
	// Replaced counts drifted instances terminated for replacement.
	Replaced int
	// Waves are the rollout record's waves at the end (the product's own
	// pace: NodesPerHour, StartedAt, CompletedAt).
	Waves []record.Wave
	// Passes and Steps count group reconciles and rollout steps.
	Passes, Steps int
}

// PerHour is nodes replaced per hour over the whole rollout.
func (r fleetResult) PerHour() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Replaced) / r.Elapsed.Hours()
}

// fleetStart is the simulation's virtual time zero.
var fleetStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fleetNamespace holds the upgrade slot Leases.
const fleetNamespace = "instance-manager"

// fleetWorld is one simulated rollout. Real: rollout.Step (waves, soak,
// judging), store.State.Desired (which groups the fan-out moves),
// slots.Leases with slots.Full (the cap), and
// upgrade.RollingUpdate.Step with its Drainer (batches, cordons, evictions,
// terminations, the batch record) against a controller-runtime fake client
// and a fakeeviction clientset. Modelled: fleetASG (Auto Scaling, EC2 and
// the kubelets), the order in which waiting groups ask for a slot (first
// come, first served), and the reconcile glue of reconciler/instancegroup
// (rotateDrifted: acquire, step, release when done).
type fleetWorld struct {
	in     fleetInputs
	now    time.Time
	client client.Client
	slots  *slots.Leases
	groups []*fleetGroup

	state    store.State // the boundaries: old (stable) and new (current) revision
	oldHash  string
	rec      *record.Record
	stepAt   time.Time // last rollout step
	stepWake time.Time // the next rollout step queued (zero: none)

	queue    wakeQueue
	seq      int
	waiting  []*fleetGroup // asked for a slot and did not get one, first first
	replaced int
	passes   int
	steps    int
}

// fleetGroup is one InstanceGroup of the simulation.
type fleetGroup struct {
	key    types.NamespacedName
	uid    types.UID
	asg    *fleetASG
	ru     *upgrade.RollingUpdate
	kube   *fakeeviction.Server // its pods, while it rotates
	moved  bool                 // the fan-out moved it to the new revision
	queued bool                 // a move is scheduled
	wake   time.Time            // its next reconcile (zero: none)
	msg    string               // the last pass's progress message
	same   int                  // passes at the same instant
	sum    rollout.Group
	wait   bool // in waiting
}

// fleetBoundaries is the boundary ConfigMap data of a revision: the
// default image (what the rollout changes) and the rollout policy.
func fleetBoundaries(in fleetInputs, image string) map[string]string {
	return map[string]string{
		"defaults": "spec:\n  eks:\n    configuration:\n      image: " + image + "\n",
		"rollout":  fmt.Sprintf("maxConcurrentUpgrades: %d\n%s", in.Cap, in.Policy),
	}
}

// newFleetWorld builds the fleet at rest on the old revision: every group
// Ready with its nodes on the current launch template version.
func newFleetWorld(ctx context.Context, in fleetInputs) (*fleetWorld, error) {
	oldData, newData := fleetBoundaries(in, "ami-old"), fleetBoundaries(in, "ami-new")
	oldCfg, err := boundaries.Parse(oldData)
	if err != nil {
		return nil, fmt.Errorf("the old revision's boundaries: %w", err)
	}
	newCfg, err := boundaries.Parse(newData)
	if err != nil {
		return nil, fmt.Errorf("the new revision's boundaries: %w", err)
	}
	oldRev, newRev := boundaries.Revision(oldData), boundaries.Revision(newData)
	w := &fleetWorld{in: in, now: fleetStart, oldHash: oldCfg.Hash(false),
		state: store.State{Config: newCfg, Revision: newRev, Loaded: true, Revisions: map[string]*boundaries.Config{oldRev: oldCfg, newRev: newCfg}}}
	// A plain object tracker: the default one (server-side apply's field
	// management) builds a REST mapper on every write, which is most of
	// the simulation's time and nothing the product's decisions read.
	scheme := app.Scheme()
	w.client = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithObjectTracker(clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())).Build()
	// The cap as app.upgradeSlots reads it: the ConfigMap's
	// rollout.maxConcurrentUpgrades (always set here) over the flag's.
	w.slots = &slots.Leases{Client: w.client, Reader: w.client, Namespace: fleetNamespace, Now: func() time.Time { return w.now },
		Max: func() int { return w.state.Config.MaxConcurrentUpgrades }}
	unavailable := intstr.FromInt32(int32(in.MaxUnavailable))
	for i := range in.Groups {
		ns := fmt.Sprintf("team-%d", i%in.Namespaces)
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("g-%d", i), Generation: 1, UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS,
				Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxUnavailable: &unavailable}}}}
		if err := w.client.Create(ctx, ig); err != nil {
			return nil, err
		}
		g := &fleetGroup{key: types.NamespacedName{Namespace: ns, Name: ig.Name}, uid: ig.UID}
		// A Drainer per group (it holds per-node state and is not copied).
		d := &drain.Drainer{Client: w.client, Timeout: 15 * time.Minute, Step: 2 * time.Millisecond, Now: func() time.Time { return w.now }}
		g.ru = &upgrade.RollingUpdate{Drainer: d, Recorder: &events.FakeRecorder{}, Client: w.client}
		g.asg = &fleetASG{w: w, g: g, name: ns + "-" + ig.Name, ns: ns, min: in.NodesPerGroup, max: 2 * in.NodesPerGroup, want: in.NodesPerGroup, ver: 1}
		for range in.NodesPerGroup {
			g.asg.launch(fleetStart.Add(-time.Hour))
		}
		if err := g.asg.advance(ctx, w.now); err != nil {
			return nil, err
		}
		w.groups = append(w.groups, g)
		w.summarize(g, g.asg.observe(w.now), v1alpha1.StateReady)
	}
	// The record as the rollout controller keeps it: the old revision
	// stable, then the new one rolling out.
	groups := w.summaries()
	w.rec = rollout.Step(nil, rollout.Input{Now: w.now, Revision: oldRev, Policy: oldCfg.Rollout, Groups: groups}).Record
	w.state.Record = w.rec
	return w, nil
}

// run rolls the new revision out until the record is Complete.
func (w *fleetWorld) run(ctx context.Context) (fleetResult, error) {
	w.step()
	for w.rec.Phase != record.PhaseComplete {
		if w.queue.Len() == 0 {
			return fleetResult{}, fmt.Errorf("the rollout stopped moving at %s: %s", w.now.Sub(fleetStart), w.rec.Message)
		}
		it := heap.Pop(&w.queue).(wakeItem)
		if it.at.Sub(fleetStart) > w.in.Limit {
			return fleetResult{}, fmt.Errorf("the rollout did not complete within %s of virtual time: %s", w.in.Limit, w.rec.Message)
		}
		w.now = it.at
		var err error
		switch it.kind {
		case wakeStep:
			if !it.at.Equal(w.stepWake) {
				continue // replaced by an earlier one
			}
			w.stepWake = time.Time{}
			w.step()
		case wakeMove:
			err = w.move(ctx, it.g)
		case wakePass:
			if !it.at.Equal(it.g.wake) {
				continue // replaced by an earlier one
			}
			it.g.wake = time.Time{}
			err = w.pass(ctx, it.g)
		}
		if err != nil {
			return fleetResult{}, err
		}
		if w.rec.Phase == record.PhaseHalted {
			return fleetResult{}, fmt.Errorf("the rollout halted at %s: %s", w.now.Sub(fleetStart), w.rec.Halt.Reason)
		}
	}
	return fleetResult{Elapsed: w.rec.CompletedAt.Sub(fleetStart), Replaced: w.replaced, Waves: w.rec.Waves, Passes: w.passes, Steps: w.steps}, nil
}

// step runs the rollout's decision over every group (rollout.Step, as the
// rollout controller does on a change) and moves the groups its record
// assigns the new revision (store.State.Desired, as the fan-out does), one
// Fanout after the other.
func (w *fleetWorld) step() {
	w.steps++
	w.stepAt = w.now
	prevWave, prevPhase := w.rec.Wave, w.rec.Phase
	res := rollout.Step(w.rec, rollout.Input{Now: w.now, Revision: w.state.Revision, Policy: w.state.Config.Rollout, Groups: w.summaries(), Configs: w.state.Revisions})
	w.rec = res.Record
	w.state.Record = w.rec
	if res.After > 0 {
		w.wantStep(w.now.Add(res.After))
	}
	if w.rec.Wave == prevWave && w.rec.Phase == prevPhase {
		return
	}
	at := w.now
	for _, g := range w.groups {
		if g.moved || g.queued {
			continue
		}
		if a := w.state.Desired(g.key.Namespace, g.key.Name, w.oldHash); a.Revision == w.state.Revision {
			at = at.Add(w.in.Fanout)
			g.queued = true
			w.push(at, wakeMove, g)
		}
	}
}

// changed queues a rollout step, at most one per RolloutEvery.
func (w *fleetWorld) changed() {
	at := w.stepAt.Add(w.in.RolloutEvery)
	if at.Before(w.now) {
		at = w.now
	}
	w.wantStep(at)
}

// wantStep queues the rollout step at at, unless one is queued before.
func (w *fleetWorld) wantStep(at time.Time) {
	if w.stepWake.IsZero() || at.Before(w.stepWake) {
		w.stepWake = at
		w.push(at, wakeStep, nil)
	}
}

// move is the fan-out's re-admission of g to the new revision: its spec
// gets the new image (a new generation), its launch template a new
// version, so every instance drifts; its pods can be evicted from now on.
func (w *fleetWorld) move(ctx context.Context, g *fleetGroup) error {
	g.moved = true
	g.asg.ver++
	g.sum.AtTarget, g.sum.Running = true, w.state.Revision
	g.sum.Generation++
	g.kube = fakeeviction.NewSimple(func() time.Time { return w.now }, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Terminate })
	g.ru.Drainer.Kube = g.kube.Kube
	for _, in := range g.asg.insts {
		if in.nodeUp {
			if err := w.schedulePod(g.asg, in); err != nil {
				return err
			}
		}
	}
	// Its reconcile reports the new generation before the rollout's
	// step reads it (wakeQueue.Less): a step that read the status of the
	// old generation would take its nodesUpdated (all of them) as the
	// baseline of the startup clock, which no progress then restarts.
	w.schedule(g, w.now)
	w.changed()
	return nil
}

// pass is one reconcile of g's rotation, as reconciler/instancegroup's
// rotate does it for an eks group: with drifted instances, take an upgrade
// slot (or wait for one), run a step of the rolling update, and give the
// slot back once it is done.
func (w *fleetWorld) pass(ctx context.Context, g *fleetGroup) error {
	w.passes++
	if err := g.asg.advance(ctx, w.now); err != nil {
		return err
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := w.client.Get(ctx, g.key, ig); err != nil {
		return err
	}
	obs := g.asg.observe(w.now)
	nodes := map[string]*corev1.Node{}
	for _, in := range g.asg.insts {
		if !in.nodeUp {
			continue
		}
		n := &corev1.Node{}
		if err := w.client.Get(ctx, client.ObjectKey{Name: in.node}, n); err != nil {
			return err
		}
		nodes[in.providerID()] = n
	}
	counted := upgrade.Counted(obs)
	drifted := counted.Updated < counted.Total || len(upgrade.Leaving(obs)) > 0
	state, msg := v1alpha1.StateReady, ""
	held, err := false, error(nil)
	if drifted {
		held, err = w.slots.Acquire(ctx, g.key, g.uid)
	}
	switch {
	case !drifted:
		if err := w.release(ctx, g); err != nil {
			return err
		}
		g.kube, g.ru.Drainer.Kube = nil, nil
	case err != nil:
		return fmt.Errorf("group %s: acquiring an upgrade slot: %w", g.key, err)
	case !held:
		state = v1alpha1.StateInitUpgrade
		if !g.wait {
			g.wait = true
			w.waiting = append(w.waiting, g)
		}
	default:
		w.dequeue(g)
		p, err := g.ru.Step(ctx, ig, obs, nodes, g.asg)
		if err != nil {
			return fmt.Errorf("group %s: rolling update: %w", g.key, err)
		}
		if p.Stopped {
			return fmt.Errorf("group %s: rotation stopped: %s", g.key, p.Message)
		}
		msg, state = p.Message, v1alpha1.StateUpgrading
		if p.Done {
			state = v1alpha1.StateReady
			if err := w.release(ctx, g); err != nil {
				return err
			}
		}
	}
	w.summarize(g, g.asg.observe(w.now), state)

	// The next reconcile: right after its own writes (the progress
	// changed), else at the next modelled change of its instances, Nodes
	// or pods.
	if msg != g.msg && state == v1alpha1.StateUpgrading {
		g.same++
		if g.same > 50 {
			return fmt.Errorf("group %s: the rolling update does not settle at %s: %s", g.key, w.now.Sub(fleetStart), msg)
		}
		g.msg = msg
		w.schedule(g, w.now.Add(w.in.React))
		return nil
	}
	g.msg, g.same = msg, 0
	deadlines, err := w.podDeadlines(ctx, g)
	if err != nil {
		return err
	}
	w.schedule(g, g.asg.next(w.now, deadlines))
	return nil
}

// release gives g's slot back (if it holds one) and wakes the groups that
// wait longest, one per free slot.
func (w *fleetWorld) release(ctx context.Context, g *fleetGroup) error {
	held := false
	for _, k := range w.slots.Holders() {
		held = held || k == g.key
	}
	if !held {
		return nil
	}
	if err := w.slots.Release(ctx, g.key, slots.ReasonDone); err != nil {
		return err
	}
	free := w.state.Config.MaxConcurrentUpgrades - len(w.slots.Holders())
	for _, next := range w.waiting[:min(max(free, 0), len(w.waiting))] {
		w.schedule(next, w.now.Add(w.in.React))
	}
	return nil
}

func (w *fleetWorld) dequeue(g *fleetGroup) {
	if !g.wait {
		return
	}
	g.wait = false
	for i, o := range w.waiting {
		if o == g {
			w.waiting = append(w.waiting[:i], w.waiting[i+1:]...)
			return
		}
	}
}

// summarize sets what the rollout reads of g (rollout.Group), as its
// status reports it, and queues a rollout step when that changed.
func (w *fleetWorld) summarize(g *fleetGroup, obs *providers.Observation, state string) {
	before := g.sum
	counted := upgrade.Counted(obs)
	s := &g.sum
	s.Key, s.Namespace = g.key.String(), g.key.Namespace
	if s.Running == "" {
		s.Running = "old"
	}
	if s.Generation == 0 {
		s.Generation = 1
	}
	s.ObservedGeneration, s.State = s.Generation, state
	s.NodesUpdated, s.NodesTotal = counted.Updated, counted.Total
	s.InService, s.ReadyNodes, s.Nodes = 0, 0, 0
	for i, in := range obs.Instances {
		if g.asg.insts[i].nodeUp {
			s.Nodes++
		}
		if in.LifecycleState == "InService" {
			s.InService++
			if g.asg.insts[i].nodeUp {
				s.ReadyNodes++
			}
		}
	}
	s.Ready = s.ReadyNodes >= g.asg.min
	s.NodesReady = s.ReadyNodes == s.InService
	if !reflect.DeepEqual(before, *s) && w.rec != nil {
		w.changed()
	}
}

func (w *fleetWorld) summaries() []rollout.Group {
	out := make([]rollout.Group, len(w.groups))
	for i, g := range w.groups {
		out[i] = g.sum
	}
	return out
}

// describe is the result's waves for a line of output.
func (r fleetResult) describe() string {
	var parts []string
	for _, wv := range r.Waves {
		d := "not started"
		if wv.StartedAt != nil && wv.CompletedAt != nil {
			d = fmt.Sprintf("%s to %s", wv.StartedAt.Sub(fleetStart).Round(time.Minute), wv.CompletedAt.Sub(fleetStart).Round(time.Minute))
		}
		parts = append(parts, fmt.Sprintf("%s: %d group(s), %d node(s), %s, %d/h", wv.Name, len(wv.Groups), wv.NodesTotal, d, wv.NodesPerHour))
	}
	return strings.Join(parts, "; ")
}
