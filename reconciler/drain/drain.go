package drain

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node annotations that carry a rotation across reconciles and restarts.
const (
	// AnnotationDrainStarted (RFC 3339 time) marks a node this controller
	// cordoned and is draining; AnnotationDrainOwner says for whom.
	AnnotationDrainStarted = "instancemgr.keikoproj.io/drain-started"
	// AnnotationDrainSkippedUntil (RFC 3339 time) marks a node whose drain
	// was blocked (by a PodDisruptionBudget) and is left alone until then.
	AnnotationDrainSkippedUntil = "instancemgr.keikoproj.io/drain-skipped-until"
	// AnnotationSurge ("true") marks a node drained after a maxSurge
	// scale-out: its instance is terminated with a capacity decrement.
	AnnotationSurge = "instancemgr.keikoproj.io/surge"
	// AnnotationScaleDownDisabled is the cluster-autoscaler's: it never
	// picks a node carrying it ("true") for scale-down. A node being
	// rotated carries it from its cordon until its instance is gone, so the
	// autoscaler does not terminate it (with a decrement) while the rotation
	// replaces it without one.
	AnnotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// annotationScaleDownDisabledByRotation ("true") records that the
	// rotation set AnnotationScaleDownDisabled, so that only then is it
	// removed again (a skipped node); one set by someone else stays.
	annotationScaleDownDisabledByRotation = "instancemgr.keikoproj.io/scale-down-disabled-by-rotation"
)

// DrainResult is the outcome of one drain step.
type DrainResult int

const (
	// Draining: evictions are under way, refused for now (429) or failing
	// (other Eviction API errors, retried), or evicted pods are still
	// terminating, within their grace period or past it.
	Draining DrainResult = iota
	// Drained: no pod that needs evicting is left on the node: every
	// non-DaemonSet, non-mirror pod was evicted and is gone, or has
	// finished (see Drainer.Drain for pods of unreachable nodes).
	Drained
	// Blocked: past the drain timeout, an eviction is still refused (HTTP
	// 429 TooManyRequests: a PodDisruptionBudget); nothing else blocks.
	Blocked
)

// Drainer cordons nodes and evicts their pods through the Eviction API
// (policy/v1 Eviction, the pods' own grace periods), listing them with the
// Kubernetes drain helper (k8s.io/kubectl/pkg/drain), so
// PodDisruptionBudgets are honoured; DaemonSet and mirror pods are
// skipped, pods with emptyDir data are evicted, finished pods are left
// alone. It deletes pods directly only past the admin's drain deadline
// (Deadline, see DrainFor). A Drainer is used by pointer: it keeps
// per-node state (arrivals.go).
type Drainer struct {
	Kube   kubernetes.Interface
	Client client.Client
	// Timeout is how long a node may drain before refused evictions (429)
	// report it Blocked.
	Timeout time.Duration
	// Step bounds how long one call to Drain may wait for evictions, so a
	// reconcile is never held for the whole drain.
	Step time.Duration
	// Now returns the current time (tests).
	Now func() time.Time
	// DryRun, when set, makes evictions with dryRun=All (nothing is
	// evicted) and gets a line per eviction ("evicting pod <ns>/<name>
	// (server dry run)"): the manager's --dry-run.
	DryRun io.Writer
	// Deadline returns the admin's drain deadline for the nodes of group
	// (boundary ConfigMap data.drains), counted from each node's
	// AnnotationDrainStarted; 0, or a nil Deadline: none. Past it a drain
	// deletes the pods it could not evict (deadline.go).
	Deadline func(group types.NamespacedName) time.Duration
	// Recorder, when set, gets the Warning Events of bounded drains (pods
	// deleted past the deadline, pods left on the node), on the Node and
	// on the group's InstanceGroup.
	Recorder events.EventRecorder

	// arrivals counts the evictions of pods that keep coming back
	// (arrivals.go).
	arrivals arrivals
	// retry is the time between two rounds of evictions and reads within
	// a step (default evictRetry; tests).
	retry time.Duration
}

// Start cordons node and marks the drain start, its owner
// (AnnotationDrainOwner) and that the cluster-autoscaler must not scale it
// down; OwnerSurge also marks that its instance gives its capacity back
// (AnnotationSurge). On a node already draining, owner takes the drain
// over only when it outranks the current owner (a termination or an
// interruption takes over a rotation's drain; a rotation never takes over
// theirs), and the drain start keeps its first time. Errors come from the
// API server.
func (d *Drainer) Start(ctx context.Context, node *corev1.Node, owner Owner) error {
	patch := client.MergeFrom(node.DeepCopy())
	cur := OwnerOf(node)
	node.Spec.Unschedulable = true
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	if _, ok := node.Annotations[AnnotationDrainStarted]; !ok {
		node.Annotations[AnnotationDrainStarted] = d.Now().UTC().Format(time.RFC3339)
	}
	if takesOver(owner, cur) {
		node.Annotations[AnnotationDrainOwner] = string(owner)
	}
	delete(node.Annotations, AnnotationDrainSkippedUntil)
	if _, ok := node.Annotations[AnnotationScaleDownDisabled]; !ok {
		node.Annotations[AnnotationScaleDownDisabled] = "true"
		node.Annotations[annotationScaleDownDisabledByRotation] = "true"
	}
	if owner == OwnerSurge {
		node.Annotations[AnnotationSurge] = "true"
	}
	if err := d.Client.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("cordoning node %s: %w", node.Name, err)
	}
	return nil
}

// Release gives node back when one of owners started its drain
// (OwnedBy): it uncordons the node, removes the drain's annotations and
// leaves the node alone for one drain timeout (AnnotationDrainSkippedUntil),
// so a rotation moves on to other nodes instead of forcing this one. A
// node drained by anyone else (an interruption, a termination, a delete)
// is left as it is and Release returns false: only a drain's owner stops
// it. A drain still in the runner is stopped first (GiveBack does both),
// so no eviction follows the uncordon. Errors come from the API server.
func (d *Drainer) Release(ctx context.Context, node *corev1.Node, owners ...Owner) (bool, error) {
	if !OwnedBy(node, owners...) {
		return false, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = false
	delete(node.Annotations, AnnotationDrainStarted)
	delete(node.Annotations, AnnotationDrainOwner)
	delete(node.Annotations, AnnotationSurge)
	if node.Annotations[annotationScaleDownDisabledByRotation] == "true" {
		delete(node.Annotations, AnnotationScaleDownDisabled)
		delete(node.Annotations, annotationScaleDownDisabledByRotation)
	}
	node.Annotations[AnnotationDrainSkippedUntil] = d.Now().Add(d.Timeout).UTC().Format(time.RFC3339)
	if err := d.Client.Patch(ctx, node, patch); err != nil {
		return false, fmt.Errorf("uncordoning node %s (its %s drain released): %w", node.Name, OwnerOf(node), err)
	}
	return true, nil
}

// GiveBack ends a drain that one of owners started (OwnedBy) and gives
// its node back: it first stops the drain in runner (Drains.Stop; nil
// runner: none), so no eviction follows the uncordon, then releases the
// node (Drainer.Release). A node drained by anyone else is left as it is
// and GiveBack returns false, nil. Errors come from the API server and
// name the node.
func GiveBack(ctx context.Context, runner *Drains, d *Drainer, node *corev1.Node, owners ...Owner) (bool, error) {
	if !OwnedBy(node, owners...) {
		return false, nil
	}
	if runner != nil {
		runner.Stop(node.Name)
	}
	return d.Release(ctx, node, owners...)
}

// Skipped reports whether node is in its skip window (AnnotationDrainSkippedUntil).
func (d *Drainer) Skipped(node *corev1.Node) bool {
	until, err := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainSkippedUntil])
	return err == nil && d.Now().Before(until)
}

// Marked reports whether node carries AnnotationDrainStarted: it was cordoned for a drain.
func Marked(node *corev1.Node) bool {
	_, ok := node.Annotations[AnnotationDrainStarted]
	return ok
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
