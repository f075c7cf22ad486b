package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// Event reasons of the rollingUpdate strategy, on the InstanceGroup.
const (
	ReasonRotationBatch = "RotationBatchStarted"
	ReasonNodeDrained   = "NodeDrained"
	ReasonDrainBlocked  = "DrainBlocked"
)

// Progress is what a strategy step reports.
type Progress struct {
	// Done is true when no drifted instance is left.
	Done bool
	// Waiting is true when the rotation has not started for lack of an
	// upgrade slot (--max-concurrent-upgrades).
	Waiting bool
	// Updated and Total count instances on the latest launch template
	// version and all instances.
	Updated, Total int
	// Message says what the rotation is doing or waiting for.
	Message string
}

// RollingUpdate rotates drifted instances a batch of maxUnavailable at a
// time: cordon, drain through the Eviction API, terminate in the group
// without decrementing its capacity, and wait until every replacement's
// node is Ready before the next batch. All of its state is in the cloud
// (instance states) and on the nodes (drain annotations), so a restarted
// controller continues where it stopped.
type RollingUpdate struct {
	Drainer  *Drainer
	Recorder events.EventRecorder
	// Client persists status.surgeBaseCapacity before a surge scale-out,
	// so the surge is given back even if this reconcile's status write is lost.
	Client client.Client
}

// Step advances the rotation of ig by what can be done now and returns
// the progress. nodes maps providerID to the group's Nodes. Errors come
// from the API server or the cloud; a blocked drain is not an error (an
// Event reports it and the node is skipped for now).
func (r *RollingUpdate) Step(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, rot providers.Rotator) (Progress, error) {
	p := Progress{Total: len(obs.Instances)}
	var drifted []providers.Instance
	for _, in := range obs.Instances {
		switch {
		case in.UpToDate:
			p.Updated++
		case !strings.HasPrefix(in.LifecycleState, "Terminating"):
			drifted = append(drifted, in)
		}
	}
	if len(drifted) == 0 {
		p.Done = true
		ig.Status.SurgeBaseCapacity = 0
		return p, nil
	}
	sort.Slice(drifted, func(i, j int) bool { return drifted[i].ID < drifted[j].ID })

	// 1. Finish the batch in flight.
	var inflight []string
	for _, in := range drifted {
		node := nodes[in.ProviderID]
		if node == nil || !draining(node) {
			continue
		}
		res, msg, err := r.Drainer.Drain(ctx, node)
		if err != nil {
			return p, err
		}
		switch res {
		case Drained:
			// A node drained after a surge gives its capacity back.
			surged := node.Annotations[AnnotationSurge] == "true"
			if err := rot.Terminate(ctx, ig, in.ID, surged); err != nil {
				return p, fmt.Errorf("terminating drained instance %s: %w", in.ID, err)
			}
			r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonNodeDrained, "Rotate",
				"Node %s drained; instance %s terminated for replacement", node.Name, in.ID)
			inflight = append(inflight, node.Name+" (terminating)")
		case Blocked:
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDrainBlocked, "Rotate",
				"%s; the node is uncordoned and skipped for now", msg)
			if err := r.Drainer.Skip(ctx, node); err != nil {
				return p, err
			}
		default:
			inflight = append(inflight, node.Name)
		}
	}
	if len(inflight) > 0 {
		p.Message = "draining " + strings.Join(inflight, ", ")
		return p, nil
	}
	if base := ig.Status.SurgeBaseCapacity; base > 0 && obs.Desired <= base {
		ig.Status.SurgeBaseCapacity = 0 // the surge batch gave its capacity back
	}

	// 2. Wait until the previous batch's replacements are Ready and the
	// group holds its desired capacity (in capacity units: with weights,
	// Desired counts units, as Auto Scaling does).
	waiting := 0
	inService := 0
	for _, in := range obs.Instances {
		if strings.HasPrefix(in.LifecycleState, "Terminating") || (!in.InService() && in.LifecycleState != "Standby") {
			waiting++
			continue
		}
		inService += in.Units()
		if node := nodes[in.ProviderID]; in.UpToDate && (node == nil || !NodeReady(node)) {
			waiting++
		}
	}
	switch {
	case waiting > 0:
		p.Message = fmt.Sprintf("waiting for %d replacement instance(s) to become Ready nodes", waiting)
		return p, nil
	case inService < obs.Desired:
		p.Message = fmt.Sprintf("waiting for %d capacity unit(s) of replacement instances to come into service (desired capacity %d, in service %d)",
			obs.Desired-inService, obs.Desired, inService)
		return p, nil
	}

	// 3. Start the next batch. With maxSurge, first scale out and let the
	// surge instances become Ready nodes; the batch that follows is drained
	// and terminated with a decrement, so capacity never drops below the
	// desired capacity.
	surging := false
	if base := ig.Status.SurgeBaseCapacity; base > 0 && obs.Desired > base {
		surging = true // the surge instances are Ready: drain as many old ones
	} else if surge := MaxSurge(ig, obs.Desired, obs.Max); surge > 0 {
		surge = min(surge, providers.Capacity(drifted, nil))
		if err := r.recordSurgeBase(ctx, ig, obs.Desired); err != nil {
			return p, err
		}
		if err := rot.SetDesiredCapacity(ctx, ig, obs.Desired+surge); err != nil {
			return p, fmt.Errorf("scaling out by maxSurge %d: %w", surge, err)
		}
		p.Message = fmt.Sprintf("launching %d surge instance(s) before draining", surge)
		return p, nil
	}
	batchSize := MaxUnavailable(ig, obs.Desired)
	if surging {
		batchSize = obs.Desired - ig.Status.SurgeBaseCapacity
	}
	// The batch holds drifted instances worth at most batchSize capacity
	// units (at least one instance, even one that weighs more).
	var batch []string
	var skipped []string
	units := 0
	for _, in := range drifted {
		if units >= batchSize {
			break
		}
		if units > 0 && units+in.Units() > batchSize {
			continue // too heavy for what is left; a lighter one may fit
		}
		node := nodes[in.ProviderID]
		if node == nil {
			// Never joined: nothing to drain.
			if err := rot.Terminate(ctx, ig, in.ID, false); err != nil {
				return p, fmt.Errorf("terminating instance %s without a node: %w", in.ID, err)
			}
			batch = append(batch, in.ID)
			units += in.Units()
			continue
		}
		if r.Drainer.skipped(node) {
			skipped = append(skipped, node.Name)
			continue
		}
		if err := r.Drainer.Start(ctx, node, surging); err != nil {
			return p, err
		}
		batch = append(batch, node.Name)
		units += in.Units()
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

// recordSurgeBase writes status.surgeBaseCapacity = base to the API server
// (retrying on conflicts) and into ig.
func (r *RollingUpdate) recordSurgeBase(ctx context.Context, ig *v1alpha1.InstanceGroup, base int) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err
		}
		cur.Status.SurgeBaseCapacity = base
		return r.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("recording the capacity before a surge: %w", err)
	}
	ig.Status.SurgeBaseCapacity = base
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

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
