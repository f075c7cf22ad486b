// Package termination drains the nodes of instances that Auto Scaling
// terminates on its own: a person in the console or API
// (TerminateInstanceInAutoScalingGroup, desired capacity lowered by hand),
// the cluster-autoscaler's scale in, health replacement, AZ rebalancing,
// max instance lifetime. Each Auto Scaling group of the eks provisioner
// carries the termination lifecycle hook awsp.DrainHookName, so such an
// instance waits in Terminating:Wait (Amazon EC2 Auto Scaling User Guide,
// "Amazon EC2 Auto Scaling lifecycle hooks"). The Controller finds it in
// the per-cluster listing the provisioner already makes (no call of its
// own), cordons its Node and drains it through the shared drain runner
// (drain.Drains: the Eviction API, PodDisruptionBudgets, the per-group
// and cluster-wide caps), then calls CompleteLifecycleAction with
// CONTINUE. A drain longer than a third of the hook's heartbeat timeout is
// extended with RecordLifecycleActionHeartbeat. An instance with no Node,
// or whose Node is already drained (the controller's own rotation and
// delete drain before they terminate), is completed at once.
package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// LifecycleActions is the part of the Auto Scaling API the controller
// calls (awsp.AutoScalingAPI has it).
type LifecycleActions interface {
	CompleteLifecycleAction(ctx context.Context, params *autoscaling.CompleteLifecycleActionInput, optFns ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(ctx context.Context, params *autoscaling.RecordLifecycleActionHeartbeatInput, optFns ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
}

// Controller drains the nodes of instances waiting in Terminating:Wait and
// completes their lifecycle action. It is a manager.Runnable that runs on
// the leader only.
type Controller struct {
	// Waits lists the waiting instances (the eks provisioner, from its
	// listings).
	Waits providers.TerminationWaits
	AWS   LifecycleActions
	// Client reads Nodes and InstanceGroups (the manager's cache).
	Client   client.Client
	Drainer  *drain.Drainer
	Drains   *drain.Drains
	Recorder events.EventRecorder
	// Heartbeat is the drain hook's heartbeat timeout
	// (awsp.DrainHookHeartbeat).
	Heartbeat time.Duration
	// Interval is how often the listing is looked at (default 2s; it costs
	// no API call: the listing is refreshed by the provisioner's poll).
	Interval time.Duration
	// Now returns the current time (tests). Default time.Now.
	Now func() time.Time

	mu    sync.Mutex
	waits map[string]*wait // by instance id
	// accepted are the waits handed over by Accept, by instance id, until
	// done or no longer waiting (see expired).
	accepted map[string]providers.TerminationWait
	wake     chan struct{}
}

// wait is what the controller keeps of one instance in Terminating:Wait.
type wait struct {
	seen, beat time.Time
	node       string // the Node being drained, "" before
	started    bool   // this controller cordoned it (not a rotation)
	toldBlock  bool   // the blocked Event was emitted
	done       bool   // completed (or no action pending): nothing more
	doneAt     time.Time
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// leader drains.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start passes over the waiting instances every Interval until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	interval := c.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	wake := c.wakeup()
	for {
		c.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
	}
}

func (c *Controller) wakeup() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	return c.wake
}

// Accept hands the controller an instance waiting in Terminating:Wait on
// the drain hook that its listing may not show yet: an EventBridge "EC2
// Instance-terminate Lifecycle Action" read from the interruption queue
// (reconciler/interruption). w.ProviderID may be empty (the event names no
// zone): the Node is found by instance id. A pass starts at once, so the
// drain begins in seconds rather than at the next listing; from then on
// the instance is handled like a listed one, until its lifecycle action
// is completed (or Auto Scaling answers that none is pending) or no
// heartbeat was made for a whole heartbeat timeout (Auto Scaling has
// ended the wait itself). Safe for concurrent use.
func (c *Controller) Accept(w providers.TerminationWait) {
	c.mu.Lock()
	if c.accepted == nil {
		c.accepted = map[string]providers.TerminationWait{}
	}
	c.accepted[w.InstanceID] = w
	c.mu.Unlock()
	select {
	case c.wakeup() <- struct{}{}:
	default:
	}
}

// withAccepted adds to the listed waits the accepted ones the listing
// does not show, dropping the accepted ones that expired.
func (c *Controller) withAccepted(list []providers.TerminationWait) []providers.TerminationWait {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for id, w := range c.accepted {
		if st := c.waits[id]; st != nil && expired(now, st, c.Heartbeat) {
			delete(c.accepted, id)
			continue
		}
		if !slices.ContainsFunc(list, func(l providers.TerminationWait) bool { return l.InstanceID == id }) {
			list = append(list, w)
		}
	}
	return list
}

func (c *Controller) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Pass handles every instance waiting now, once, and forgets (stopping
// their drains) those that no longer wait.
func (c *Controller) Pass(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("termination")
	c.mu.Lock()
	if c.waits == nil {
		c.waits = map[string]*wait{}
	}
	c.mu.Unlock()
	list := c.withAccepted(c.Waits.TerminationWaits())
	waiting.Set(float64(len(list)))
	if len(list) > 0 {
		nodes := &corev1.NodeList{}
		if err := c.Client.List(ctx, nodes); err != nil {
			logger.Error(err, "listing nodes")
			return
		}
		byInstance := map[string]*corev1.Node{}
		for i := range nodes.Items {
			if id := providers.InstanceID(nodes.Items[i].Spec.ProviderID); id != "" {
				byInstance[id] = &nodes.Items[i]
			}
		}
		for _, w := range list {
			if err := c.handle(ctx, w, byInstance[w.InstanceID]); err != nil && ctx.Err() == nil {
				logger.Info("termination drain", "instance", w.InstanceID, "group", w.Group.String(), "error", err.Error())
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, st := range c.waits {
		if slices.ContainsFunc(list, func(w providers.TerminationWait) bool { return w.InstanceID == id }) {
			continue
		}
		if st.node != "" && c.Drains != nil {
			c.Drains.Stop(st.node) // the instance is gone: nothing to drain for
		}
		delete(c.waits, id)
	}
}

// handle advances one waiting instance whose Node is node (nil: none).
func (c *Controller) handle(ctx context.Context, w providers.TerminationWait, node *corev1.Node) error {
	c.mu.Lock()
	st := c.waits[w.InstanceID]
	if st == nil {
		now := c.now()
		st = &wait{seen: now, beat: now}
		c.waits[w.InstanceID] = st
	}
	c.mu.Unlock()
	if st.done {
		return nil
	}
	switch first(node) {
	case stepComplete:
		return c.complete(ctx, w, st, "no_node", "")
	case stepCordon:
		wasDraining := drain.Marked(node)
		if err := c.Drainer.Start(ctx, node, drain.OwnerTermination); err != nil {
			return err
		}
		if wasDraining {
			break // a rotation's drain, taken over: it goes on, told already
		}
		st.started = true
		c.event(ctx, w, corev1.EventTypeNormal, EventDrainStarted,
			"Auto Scaling is terminating instance %s of %s (Terminating:Wait); node %s is cordoned and drained before it goes", w.InstanceID, w.ScalingGroup, node.Name)
	}
	st.node = node.Name
	res, msg, err := c.Drains.PollHeld(ctx, w.Group, node)
	switch after(res, err) {
	case complete:
		back, rerr := c.returned(ctx, w, node)
		if rerr == nil && !back {
			reason := "already_drained"
			if st.started {
				reason = "drained"
			}
			return c.complete(ctx, w, st, reason, node.Name)
		}
		err = rerr // a pod came back: drained again, heartbeating meanwhile
	case blocked:
		if !st.toldBlock {
			st.toldBlock = true
			c.event(ctx, w, corev1.EventTypeWarning, EventDrainBlocked,
				"%s; instance %s stays in Terminating:Wait (heartbeats) while evictions are retried", msg, w.InstanceID)
		}
	}
	if hbErr := c.heartbeat(ctx, w, st); hbErr != nil {
		return hbErr
	}
	return err
}

// returned reads node's pods again before its instance may go
// (drain.Drainer.RemainingFor, as a group's deletion does): a pod that
// landed on it after its drain ended Drained (one tolerating the cordon,
// which the drain's own last listing leaves to a rotation) would die with
// the instance, outside its PodDisruptionBudget. Such a node's drain
// starts again, so the pod is evicted like the others; past
// drain.MaxArrivalEvictions evictions of its workload (or the drain
// deadline) RemainingFor leaves it, named in a DrainPodsLeft Warning, and
// the instance goes. It reports whether the drain started again.
func (c *Controller) returned(ctx context.Context, w providers.TerminationWait, node *corev1.Node) (bool, error) {
	pods, err := c.Drainer.RemainingFor(ctx, w.Group, node)
	if err != nil || len(pods) == 0 {
		return false, err
	}
	c.Drains.Stop(node.Name) // its outcome, Drained, is stale
	_, _, err = c.Drains.PollHeld(ctx, w.Group, node)
	return true, err
}

// heartbeat extends the wait when due (RecordLifecycleActionHeartbeat).
func (c *Controller) heartbeat(ctx context.Context, w providers.TerminationWait, st *wait) error {
	now := c.now()
	if !heartbeatDue(now, st.beat, c.Heartbeat) {
		return nil
	}
	_, err := c.AWS.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: awssdk.String(w.ScalingGroup), LifecycleHookName: awssdk.String(awsp.DrainHookName), InstanceId: awssdk.String(w.InstanceID)})
	if noAction(err) {
		st.done, st.doneAt = true, now // completed by someone else, or timed out
		completions.WithLabelValues("not_waiting").Inc()
		return nil
	}
	if err != nil {
		return fmt.Errorf("autoscaling RecordLifecycleActionHeartbeat %s/%s: %w", w.ScalingGroup, w.InstanceID, err)
	}
	st.beat = now
	heartbeats.Inc()
	return nil
}

// complete calls CompleteLifecycleAction (CONTINUE) for the drain hook.
func (c *Controller) complete(ctx context.Context, w providers.TerminationWait, st *wait, reason, node string) error {
	_, err := c.AWS.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: awssdk.String(w.ScalingGroup), LifecycleHookName: awssdk.String(awsp.DrainHookName),
		InstanceId: awssdk.String(w.InstanceID), LifecycleActionResult: awssdk.String("CONTINUE")})
	switch {
	case noAction(err):
		// No action of the drain hook is pending: the group does not
		// carry the hook yet (another hook holds the instance) or it was
		// completed or timed out meanwhile.
		reason = "not_waiting"
	case err != nil:
		return fmt.Errorf("autoscaling CompleteLifecycleAction %s/%s: %w", w.ScalingGroup, w.InstanceID, err)
	}
	st.done, st.doneAt = true, c.now()
	completions.WithLabelValues(reason).Inc()
	if reason == "drained" {
		c.event(ctx, w, corev1.EventTypeNormal, EventDrained,
			"Node %s drained; instance %s may now terminate (CompleteLifecycleAction CONTINUE)", node, w.InstanceID)
	}
	log.FromContext(ctx).WithName("termination").Info("lifecycle action completed", "instance", w.InstanceID,
		"group", w.Group.String(), "node", node, "reason", reason)
	return nil
}

// event records an Event on the InstanceGroup, when it still exists.
func (c *Controller) event(ctx context.Context, w providers.TerminationWait, typ, reason, note string, args ...any) {
	if c.Recorder == nil {
		return
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := c.Client.Get(ctx, w.Group, ig); err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("reading the InstanceGroup for an Event", "group", w.Group.String(), "error", err.Error())
		}
		return
	}
	c.Recorder.Eventf(ig, nil, typ, reason, action, note, args...)
}

// noAction reports whether Auto Scaling answered that no lifecycle action
// of the hook is pending for the instance (ValidationError "No active
// Lifecycle Action found with instance ID ...").
func noAction(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError"
}
