package interruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Outcome is what handling a message came to (the metric's outcome).
type Outcome string

// Outcomes of one message. Every outcome but OutcomeRetry deletes it.
const (
	// OutcomeHandedOver: a lifecycle action of the drain hook, handed to
	// the termination controller.
	OutcomeHandedOver Outcome = "handed_over"
	// OutcomeDraining: the node is cordoned and its drain started (or it
	// was draining already).
	OutcomeDraining Outcome = "draining"
	// OutcomeEventOnly: a rebalance recommendation, told in Events.
	OutcomeEventOnly Outcome = "event_only"
	// OutcomeNoNode: the instance is a group's but has no Node (never
	// joined, or already gone): nothing to drain.
	OutcomeNoNode Outcome = "no_node"
	// OutcomeNotOurs: no InstanceGroup owns the instance or Auto Scaling
	// group: left untouched.
	OutcomeNotOurs Outcome = "not_ours"
	// OutcomeIgnored: nothing to do (another hook, a launch, a state that
	// is not leaving, another detail-type).
	OutcomeIgnored Outcome = "ignored"
	// OutcomeRetry: a transient failure (the API server); the message
	// stays and is delivered again after the queue's visibility timeout.
	OutcomeRetry Outcome = "retry"
	// OutcomeUnparseable: not an event of the expected shape; deleted.
	OutcomeUnparseable Outcome = "unparseable"
)

// Acceptor takes an instance waiting in Terminating:Wait
// (termination.Controller.Accept).
type Acceptor interface {
	Accept(w providers.TerminationWait)
}

// Handler acts on parsed events; Pass advances the drains it started.
// Safe for concurrent use.
type Handler struct {
	// Owners tells which InstanceGroup owns an Auto Scaling group or an
	// instance (the eks provisioner's listings).
	Owners providers.ScalingGroupOwners
	// Terminations gets the lifecycle actions (the termination
	// controller).
	Terminations Acceptor
	// Client reads Nodes and InstanceGroups (the manager's cache).
	Client   client.Client
	Drainer  *drain.Drainer
	Drains   *drain.Drains
	Recorder events.EventRecorder
	// ReleaseAfter is how long after its drain started a node the
	// interruption drained is given back (uncordoned, with an Event) when
	// its instance survived: still InService in its Auto Scaling group and
	// its Node Ready (a stop that was undone, a reclaim that did not
	// come). Default DefaultReleaseAfter.
	ReleaseAfter time.Duration
	// Now returns the current time (tests); default time.Now.
	Now func() time.Time

	mu       sync.Mutex
	drains   map[string]*nodeDrain // by node name
	lastScan time.Time             // of the Nodes for drains to adopt (adopt)
}

// nodeDrain is a drain the Handler started, joined or adopted for an
// interruption.
type nodeDrain struct {
	group     types.NamespacedName
	instance  string
	toldBlock bool
	// drained: the node is empty; the Handler only watches whether its
	// instance survives (releaseSurvivor).
	drained bool
}

// Handle acts on ev and says what it came to. An error (only with
// OutcomeRetry) is transient: the message must stay in the queue.
func (h *Handler) Handle(ctx context.Context, ev Event) (Outcome, error) {
	switch ev.Kind {
	case KindLifecycle:
		return h.lifecycle(ev), nil
	case KindSpot, KindStateChange:
		if ev.Kind == KindStateChange && !leaving(ev.State) {
			return OutcomeIgnored, nil
		}
		return h.drain(ctx, ev)
	case KindRebalance:
		return h.rebalance(ctx, ev)
	default:
		return OutcomeIgnored, nil
	}
}

// lifecycle hands a Terminating:Wait of the drain hook on an owned Auto
// Scaling group to the termination controller. Other hooks (a spec's) are
// not the controller's to complete.
func (h *Handler) lifecycle(ev Event) Outcome {
	if ev.Hook != awsp.DrainHookName || (ev.Transition != "" && ev.Transition != "autoscaling:EC2_INSTANCE_TERMINATING") {
		return OutcomeIgnored
	}
	group, ok := h.Owners.ScalingGroupOwner(ev.ScalingGroup)
	if !ok {
		return OutcomeNotOurs
	}
	h.Terminations.Accept(providers.TerminationWait{Group: group, ScalingGroup: ev.ScalingGroup, InstanceID: ev.InstanceID, Token: ev.Token})
	return OutcomeHandedOver
}

// drain cordons and drains the Node of an instance EC2 is about to
// reclaim (spot) or that is shutting down or stopping, when it belongs to
// an InstanceGroup.
func (h *Handler) drain(ctx context.Context, ev Event) (Outcome, error) {
	node, group, out, err := h.owned(ctx, ev.InstanceID)
	if node == nil {
		return out, err
	}
	h.mu.Lock()
	_, tracked := h.drains[node.Name]
	h.mu.Unlock()
	if tracked {
		return OutcomeDraining, nil
	}
	// The interruption owns the drain from now on, even one a rotation
	// started: no rotation path may give the node back (review N1).
	if drain.NeedsStart(node, drain.OwnerInterruption) {
		if err := h.Drainer.Start(ctx, node, drain.OwnerInterruption); err != nil {
			return OutcomeRetry, err
		}
	}
	if _, _, err := h.Drains.PollHeld(ctx, group, node); err != nil {
		return OutcomeRetry, err
	}
	h.mu.Lock()
	if h.drains == nil {
		h.drains = map[string]*nodeDrain{}
	}
	h.drains[node.Name] = &nodeDrain{group: group, instance: ev.InstanceID}
	h.mu.Unlock()
	what := fmt.Sprintf("EC2 spot interruption warning (instance-action %s)", ev.Action)
	if ev.Kind == KindStateChange {
		what = "EC2 state change to " + ev.State
	}
	h.event(ctx, group, node, corev1.EventTypeWarning, EventDrainStarted,
		"%s for instance %s: node %s is cordoned and drained through the Eviction API (PodDisruptionBudgets apply)", what, ev.InstanceID, node.Name)
	return OutcomeDraining, nil
}

// rebalance tells of a rebalance recommendation in Events and does
// nothing else: replacing an instance at elevated risk before it is
// interrupted costs a launch and a drain that the interruption may never
// make necessary (AWS Node Termination Handler and Karpenter also make it
// an opt-in): a policy choice, not the drain path's.
func (h *Handler) rebalance(ctx context.Context, ev Event) (Outcome, error) {
	node, group, out, err := h.owned(ctx, ev.InstanceID)
	if node == nil {
		return out, err
	}
	h.event(ctx, group, node, corev1.EventTypeNormal, EventRebalance,
		"EC2 recommends rebalancing instance %s (node %s): its spot interruption risk is elevated; instance-manager takes no action until an interruption warning or a termination", ev.InstanceID, node.Name)
	return OutcomeEventOnly, nil
}

// owned finds the Node of instance id and the InstanceGroup it belongs to:
// the group whose Auto Scaling group lists the instance, else the group
// the Node's labels name, if it exists. With a nil node, the outcome (and
// error) say why.
func (h *Handler) owned(ctx context.Context, id string) (*corev1.Node, types.NamespacedName, Outcome, error) {
	nodes := &corev1.NodeList{}
	if err := h.Client.List(ctx, nodes); err != nil {
		return nil, types.NamespacedName{}, OutcomeRetry, fmt.Errorf("listing nodes: %w", err)
	}
	var node *corev1.Node
	for i := range nodes.Items {
		if providers.InstanceID(nodes.Items[i].Spec.ProviderID) == id {
			node = &nodes.Items[i]
			break
		}
	}
	if w, ok := h.Owners.InstanceOwner(id); ok {
		if node == nil {
			return nil, w.Group, OutcomeNoNode, nil
		}
		return node, w.Group, "", nil
	}
	if node == nil {
		return nil, types.NamespacedName{}, OutcomeNotOurs, nil
	}
	group := types.NamespacedName{Namespace: node.Labels[v1alpha1.LabelInstanceGroupNamespace], Name: node.Labels[v1alpha1.LabelInstanceGroup]}
	if group.Namespace == "" || group.Name == "" {
		return nil, group, OutcomeNotOurs, nil
	}
	if err := h.Client.Get(ctx, group, &v1alpha1.InstanceGroup{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, group, OutcomeNotOurs, nil
		}
		return nil, group, OutcomeRetry, fmt.Errorf("reading InstanceGroup %s: %w", group, err)
	}
	return node, group, "", nil
}

// Pass advances every drain the Handler owns (drain.OwnerInterruption):
// it first adopts those it does not track (adopt: a restart or a new
// leader, as the queue's message is gone by then); a drained node is
// reported and then watched until it goes or its instance survives
// (releaseSurvivor); a node gone, or given back (uncordoned by hand: no
// drain-started annotation), stops its drain; a drain blocked past the
// drain timeout is reported once and started again.
func (h *Handler) Pass(ctx context.Context) {
	h.adopt(ctx)
	h.mu.Lock()
	names := make([]string, 0, len(h.drains))
	for name := range h.drains {
		names = append(names, name)
	}
	h.mu.Unlock()
	for _, name := range names {
		h.mu.Lock()
		d := h.drains[name]
		h.mu.Unlock()
		node := &corev1.Node{}
		err := h.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		if apierrors.IsNotFound(err) || (err == nil && !drain.Marked(node)) {
			h.forget(name)
			continue
		}
		if err != nil {
			log.FromContext(ctx).WithName("interruption").Info("reading node", "node", name, "error", err.Error())
			continue
		}
		if d.drained {
			h.releaseSurvivor(ctx, d, node)
			continue
		}
		res, msg, err := h.Drains.PollHeld(ctx, d.group, node)
		switch {
		case err != nil:
			log.FromContext(ctx).WithName("interruption").Info("interruption drain", "node", name, "error", err.Error())
		case res == drain.Drained:
			h.Drains.Stop(name) // done; the node stays cordoned: its instance is going
			h.mu.Lock()
			d.drained = true
			h.mu.Unlock()
			h.event(ctx, d.group, node, corev1.EventTypeNormal, EventDrained, "Node %s of interrupted instance %s drained", name, d.instance)
		case res == drain.Blocked && !d.toldBlock:
			d.toldBlock = true
			h.event(ctx, d.group, node, corev1.EventTypeWarning, EventDrainBlocked, "%s; evictions of interrupted instance %s are retried until it is gone", msg, d.instance)
		}
	}
}

// forget stops the drain of node (the shared runner holds it until then).
func (h *Handler) forget(node string) {
	h.Drains.Stop(node)
	h.mu.Lock()
	delete(h.drains, node)
	h.mu.Unlock()
}

// Tracked returns how many interruption drains are under way (drained
// nodes watched for a surviving instance are not counted).
func (h *Handler) Tracked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, d := range h.drains {
		if !d.drained {
			n++
		}
	}
	return n
}

// event records an Event on node and on the InstanceGroup (when it
// exists).
func (h *Handler) event(ctx context.Context, group types.NamespacedName, node *corev1.Node, typ, reason, note string, args ...any) {
	if h.Recorder == nil {
		return
	}
	targets := []runtime.Object{node}
	ig := &v1alpha1.InstanceGroup{}
	if err := h.Client.Get(ctx, group, ig); err == nil {
		targets = append(targets, ig)
	}
	for _, t := range targets {
		h.Recorder.Eventf(t, nil, typ, reason, action, note, args...)
	}
}
