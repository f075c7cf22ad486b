package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Drains runs node drains in the background, off the reconcile path: a
// reconcile asks for a node's drain with Poll, which starts it (or reads
// how it is going) and returns at once. Each drain advances by steps of
// Drainer.Drain (at most Drainer.Step long); a drain still under way after
// a step goes to the back of the queue, so drains blocked by
// PodDisruptionBudgets take turns with the others instead of holding
// their slots. At most Max steps run at once cluster-wide and PerGroup
// per InstanceGroup. A drain that ends (drained, blocked past
// Drainer.Timeout, or failed) is sent on Finished, so its group is
// reconciled without waiting for its next poll. A drain ends without an
// outcome when Stop, Retain or Cancel drops it, or when its node no longer
// carries AnnotationDrainStarted (uncordoned by Drainer.Skip): nothing
// evicts from a node given back.
//
// Drains is a manager.Runnable (leader only): Start runs the dispatcher.
// Poll may be called before Start; the drains wait in the queue. Safe for
// concurrent use. Drains of instances about to be taken away (an
// interruption's, a termination hook's) step first and have a slot of
// their own beyond Max.
type Drains struct {
	Drainer *Drainer
	// Max caps the drain steps running at once cluster-wide
	// (--max-concurrent-drains); 0 or less means 1.
	Max int
	// PerGroup caps the drain steps of one InstanceGroup running at once
	// (--max-concurrent-drains-per-group); 0 or less means no cap other
	// than Max.
	PerGroup int
	// Interval is the least time between two steps of the same drain
	// (default 1s), so a blocked drain does not call the Eviction API in a
	// loop.
	Interval time.Duration

	// stepFn replaces drainOnce (tests).
	stepFn func(ctx context.Context, node string) (DrainResult, string, error)

	once     sync.Once
	mu       sync.Mutex
	jobs     map[string]*drainJob // by node name
	queue    []*drainJob          // waiting for a slot, oldest first
	running  int
	perGroup map[types.NamespacedName]int
	wake     chan struct{}
	finished chan event.TypedGenericEvent[types.NamespacedName]
	ctx      context.Context // Start's; nil until then
}

type jobState int

const (
	jobQueued jobState = iota
	jobRunning
	jobDone
)

// drainJob is the drain of one node for one group.
type drainJob struct {
	group  types.NamespacedName
	node   string
	state  jobState
	nextAt time.Time
	ctx    context.Context
	cancel context.CancelFunc
	// result, msg and err: the outcome (jobDone) or the last step's
	// message (the evictions refused so far).
	result DrainResult
	msg    string
	err    error
	// held: a caller other than the group's reconcile (the termination
	// controller) depends on this drain; Retain and Cancel leave it, only
	// Stop ends it.
	held bool
	// urgent: the node's instance is about to be taken (urgentOwner): the
	// drain steps ahead of the others and may use the reserved slot.
	urgent bool
}

// urgentOwner reports whether a drain by o races a deadline someone else
// set: EC2 reclaims a spot instance two minutes after its warning, and
// Auto Scaling ends a lifecycle hook's wait at its heartbeat timeout.
// Such drains are not queued behind rotations, deletions and GC sweeps
// (review N15).
func urgentOwner(o Owner) bool { return o == OwnerInterruption || o == OwnerTermination }

var (
	drainsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_drains_running",
		Help: "Node drain steps running now (at most --max-concurrent-drains).",
	})
	drainsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_drains_queued",
		Help: "Node drains waiting for a drain slot or for their next step.",
	})
	drainsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_drains_finished_total",
		Help: "Node drains that ended, by result (drained, blocked, failed).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(drainsRunning, drainsQueued, drainsFinished)
}

func (d *Drains) init() {
	d.once.Do(func() {
		d.jobs = map[string]*drainJob{}
		d.perGroup = map[types.NamespacedName]int{}
		d.wake = make(chan struct{}, 1)
		d.finished = make(chan event.TypedGenericEvent[types.NamespacedName], 1024)
	})
}

// Finished is the channel of the groups whose drains ended (a
// source.Channel for the InstanceGroup controller). A send that finds it
// full is dropped: the group is polled again anyway.
func (d *Drains) Finished() <-chan event.TypedGenericEvent[types.NamespacedName] {
	d.init()
	return d.finished
}

// Poll starts the drain of node for group, or reports on the one under
// way (one per node, whichever group asked first). It never waits: it
// returns Draining while the drain is queued or running (with the
// evictions refused so far, if any), then its outcome: Drained, Blocked
// (the message names the node and the pods left) or the error of listing
// or evicting pods. Drained is kept (a cordoned node stays drained) until
// Retain or Cancel drops it; Blocked and errors are handed out once, and
// the next Poll of the node starts a new drain. The node must have been
// cordoned with Drainer.Start (its drain-started annotation dates the
// drain).
func (d *Drains) Poll(_ context.Context, group types.NamespacedName, node *corev1.Node) (DrainResult, string, error) {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	job := d.jobs[node.Name]
	if job != nil && urgentOwner(OwnerOf(node)) {
		job.urgent = true // taken over since it was queued
	}
	if job == nil {
		job = &drainJob{group: group, node: node.Name, urgent: urgentOwner(OwnerOf(node))}
		d.jobs[node.Name] = job
		d.queue = append(d.queue, job)
		d.signal()
		d.gauges()
		return Draining, "", nil
	}
	if job.state != jobDone {
		return Draining, job.msg, nil
	}
	if job.result == Drained && job.err == nil {
		return Drained, job.msg, nil
	}
	delete(d.jobs, node.Name)
	return job.result, job.msg, job.err
}

// PollHeld is Poll for a drain that Retain and Cancel must leave alone:
// the termination controller drains the node of an instance Auto Scaling
// is terminating (reconciler/termination), which the group's rotation or
// delete, listing only the instances they act on, would otherwise drop;
// the garbage collector drains the nodes of an orphan whose InstanceGroup
// is gone (reconciler/gc), whose reconcile would cancel them.
// The drain counts toward group's PerGroup cap like any other. The caller
// ends it with Stop once the instance is gone.
func (d *Drains) PollHeld(ctx context.Context, group types.NamespacedName, node *corev1.Node) (DrainResult, string, error) {
	res, msg, err := d.Poll(ctx, group, node)
	d.mu.Lock()
	if job := d.jobs[node.Name]; job != nil {
		job.held = true
	}
	d.mu.Unlock()
	return res, msg, err
}

// Cancel stops and forgets every drain of group (the group is gone, or
// its delete no longer drains) but the held ones (PollHeld); a running
// step is interrupted.
func (d *Drains) Cancel(group types.NamespacedName) {
	d.Retain(group, nil)
}

// Retain stops and forgets the drains of group whose node is not in
// nodes (nodes gone, or no longer being drained), but the held ones
// (PollHeld).
func (d *Drains) Retain(group types.NamespacedName, nodes []string) {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, job := range d.jobs {
		if job.group != group || job.held || slices.Contains(nodes, name) {
			continue
		}
		d.drop(job)
	}
	d.gauges()
}

// Stop stops and forgets the drains of the named nodes, whichever group
// started them: the nodes were uncordoned (a stalled rotation gives its
// nodes back), so nothing may evict from them any more; a running step is
// interrupted.
func (d *Drains) Stop(nodes ...string) {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range nodes {
		if job := d.jobs[name]; job != nil {
			d.drop(job)
		}
	}
	d.gauges()
}

// Draining returns the nodes whose drains group has queued or running.
func (d *Drains) Draining(group types.NamespacedName) []string {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name, job := range d.jobs {
		if job.group == group && job.state != jobDone {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// drop forgets job (d.mu held); its running step, if any, is cancelled
// and its outcome discarded.
func (d *Drains) drop(job *drainJob) {
	delete(d.jobs, job.node)
	if i := slices.Index(d.queue, job); i >= 0 {
		d.queue = slices.Delete(d.queue, i, i+1)
	}
	if job.cancel != nil {
		job.cancel()
	}
}

// Start runs the dispatcher until ctx ends; the drains under way are
// then cancelled. It implements manager.Runnable.
func (d *Drains) Start(ctx context.Context) error {
	d.init()
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		next := d.dispatch()
		d.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			d.mu.Lock()
			for _, job := range d.jobs {
				d.drop(job)
			}
			d.gauges()
			d.mu.Unlock()
			return nil
		case <-d.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// dispatch starts the queued drains that slots allow and returns when
// the next queued drain may step (zero: none waits for time). Urgent
// drains (urgentOwner) go first, whatever their age, are not held by the
// PerGroup cap, and may use one slot beyond Max that only they use;
// the others go oldest first. d.mu is held.
func (d *Drains) dispatch() time.Time {
	now := time.Now()
	var next time.Time
	limit := max(d.Max, 1)
	for _, urgent := range []bool{true, false} {
		for i := 0; i < len(d.queue); {
			job := d.queue[i]
			free := d.running < limit || (urgent && d.running < limit+1)
			if job.urgent != urgent || !free || (!urgent && d.PerGroup > 0 && d.perGroup[job.group] >= d.PerGroup) {
				i++
				continue
			}
			if now.Before(job.nextAt) {
				if next.IsZero() || job.nextAt.Before(next) {
					next = job.nextAt
				}
				i++
				continue
			}
			d.queue = slices.Delete(d.queue, i, i+1)
			job.state = jobRunning
			job.ctx, job.cancel = context.WithCancel(d.ctx)
			d.running++
			d.perGroup[job.group]++
			go d.step(job)
		}
	}
	d.gauges()
	return next
}

// step runs one Drainer.Drain of job's node and files the outcome: still
// draining goes to the back of the queue, anything else ends the job and
// notifies its group.
func (d *Drains) step(job *drainJob) {
	run := d.drainOnce
	if d.stepFn != nil {
		run = d.stepFn
	}
	res, msg, err := run(job.ctx, job.node)
	d.mu.Lock()
	d.running--
	if d.perGroup[job.group]--; d.perGroup[job.group] <= 0 {
		delete(d.perGroup, job.group)
	}
	job.cancel()
	if d.jobs[job.node] != job { // cancelled meanwhile
		d.gauges()
		d.mu.Unlock()
		d.signal()
		return
	}
	if errors.Is(err, errNotDraining) {
		// Uncordoned meanwhile: the drain ends without an outcome; a
		// caller that cordons the node again starts a new one.
		delete(d.jobs, job.node)
		d.gauges()
		d.mu.Unlock()
		d.signal()
		return
	}
	job.msg = msg
	if err == nil && res == Draining {
		job.state = jobQueued
		job.nextAt = time.Now().Add(d.interval())
		d.queue = append(d.queue, job)
		d.gauges()
		d.mu.Unlock()
		d.signal()
		return
	}
	job.state, job.result, job.err = jobDone, res, err
	d.gauges()
	d.mu.Unlock()
	d.signal()
	label := map[DrainResult]string{Drained: "drained", Blocked: "blocked"}[res]
	if err != nil {
		label = "failed"
	}
	drainsFinished.WithLabelValues(label).Inc()
	select {
	case d.finished <- event.TypedGenericEvent[types.NamespacedName]{Object: job.group}:
	default: // full: the group is polled again anyway
	}
}

// errNotDraining ends a drain whose node no longer carries
// AnnotationDrainStarted: it was uncordoned (Drainer.Skip) and nothing
// may evict from it.
var errNotDraining = errors.New("node no longer marked for a drain")

// drainOnce reads the node (a node gone has nothing left to evict) and
// runs one drain step on it, unless the node is no longer marked for a
// drain (errNotDraining).
func (d *Drains) drainOnce(ctx context.Context, name string) (DrainResult, string, error) {
	node := &corev1.Node{}
	if err := d.Drainer.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return Drained, "", nil
		}
		if ctx.Err() != nil {
			return Draining, "", nil
		}
		return Draining, "", fmt.Errorf("reading node %s to drain it: %w", name, err)
	}
	if !Marked(node) {
		// The cache may not have seen the cordon that queued this drain
		// yet: the API server says.
		live, err := d.Drainer.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return Drained, "", nil
		case err != nil && ctx.Err() != nil:
			return Draining, "", nil
		case err != nil:
			return Draining, "", fmt.Errorf("reading node %s to drain it: %w", name, err)
		case !Marked(live):
			return Draining, "", errNotDraining
		}
		node = live
	}
	return d.Drainer.Drain(ctx, node)
}

func (d *Drains) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Drains) gauges() {
	drainsRunning.Set(float64(d.running))
	drainsQueued.Set(float64(len(d.queue)))
}

func (d *Drains) interval() time.Duration {
	if d.Interval > 0 {
		return d.Interval
	}
	return time.Second
}
