// Package fanout is the re-admission controller (BOUNDARIES.md "Fan-out"):
// it brings every InstanceGroup to the boundaries revision assigned to it
// by an update that makes the mutating webhook recompute its effective
// spec, and writes the BoundariesApplied condition.
package fanout

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Event reasons on InstanceGroups from the fan-out.
const (
	ReasonBoundariesApplied  = "BoundariesApplied"
	ReasonBoundariesRejected = "BoundariesRejected"
)

// readmitWorkers is how many groups the fan-out re-admits at once.
const readmitWorkers = 4

// Reconciler is the fan-out (BOUNDARIES.md "Fan-out"): every
// InstanceGroup whose boundaries-hash differs from the hash of the
// boundaries revision assigned to it (store.State.Desired: the current
// one, unless a progressive rollout holds the group on the last good one)
// is re-admitted by an update from the controller carrying that hash, and
// the mutating webhook recomputes its effective spec from the kept
// submission against that revision. It is triggered by InstanceGroup changes, by
// every valid boundary change (through the Store; the excludedNamespaces
// list is part of it).
// It writes the BoundariesApplied condition and status.boundaries.
type Reconciler struct {
	// Client reads InstanceGroups from the cache and writes the
	// re-admission updates and the condition.
	Client   client.Client
	Store    *store.Store
	Recorder events.EventRecorder
	// AllowNoBoundaries: without a boundary ConfigMap, groups are
	// re-admitted as submitted. Off, their stored spec is kept.
	AllowNoBoundaries bool
}

// conflictRetry is how soon a group whose condition write lost a race is
// reconciled again. The write that won (a finalizer, the InstanceGroup
// controller's status) does not change annotations, so the watch predicate
// would never bring the group back by itself.
const conflictRetry = 100 * time.Millisecond

// Reconcile re-admits one InstanceGroup if its boundaries are stale.
// Errors other than a webhook rejection are returned for a retry.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	st := r.Store.Get()
	if !st.Loaded {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ig); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ig.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if st.Config == nil && !r.AllowNoBoundaries {
		// Fail closed: no boundaries never loosens a stored spec.
		_, res, err := r.setCondition(ctx, ig, metav1.ConditionFalse, "NoBoundaries",
			"The boundary ConfigMap does not exist; the spec computed from the last boundaries is kept")
		return res, err
	}
	d := st.Desired(ig.Namespace, ig.Name, ig.Annotations[v1alpha1.AnnotationBoundariesHash])
	if ig.Annotations[v1alpha1.AnnotationBoundariesHash] == d.Hash {
		return r.markAssigned(ctx, ig, d)
	}

	logger := log.FromContext(ctx).WithValues("instanceGroup", req.NamespacedName)
	// An update by the controller makes the mutating webhook recompute the
	// effective spec from the submitted-spec annotation, against the
	// revision whose hash the update carries.
	if ig.Annotations == nil {
		ig.Annotations = map[string]string{}
	}
	ig.Annotations[v1alpha1.AnnotationBoundariesHash] = d.Hash
	err := r.Client.Update(ctx, ig)
	switch {
	case err == nil:
		readmissions.WithLabelValues("applied").Inc()
		// The annotation change brings the group back here, where its
		// condition moves and the Event is sent.
		logger.Info("re-admitted after a boundary change", "revision", d.Revision, "hash", ig.Annotations[v1alpha1.AnnotationBoundariesHash])
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// The webhooks refused the new effective spec: keep the old one,
		// say why (the Event once per new refusal), and retry with
		// backoff: what refused it (a quota, an allowlist) may change
		// without changing the boundaries hash, so no fan-out would
		// bring the group back.
		readmissions.WithLabelValues("rejected").Inc()
		msg := fmt.Sprintf("The boundaries revision %s was not applied: %v", d.Revision, err)
		since := time.Now()
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied); c != nil && c.Reason == "Rejected" {
			since = c.LastTransitionTime.Time
		}
		written, res, err := r.setCondition(ctx, ig, metav1.ConditionFalse, "Rejected", msg)
		if written {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonBoundariesRejected, "Readmit", "%s", msg)
		}
		if err == nil && res.RequeueAfter == 0 {
			res.RequeueAfter = readmitRetry(time.Since(since))
		}
		return res, err
	default:
		readmissions.WithLabelValues("error").Inc()
		return ctrl.Result{}, fmt.Errorf("re-admitting InstanceGroup %s: %w", req.NamespacedName, err)
	}
}

// Bounds of the retry of a refused re-admission.
const (
	readmitRetryMin = 30 * time.Second
	readmitRetryMax = 10 * time.Minute
)

// readmitRetry is how long a group whose re-admission has been refused for
// refusedFor waits before the next attempt: as long again (doubling the
// interval without a counter), within readmitRetryMin and readmitRetryMax.
func readmitRetry(refusedFor time.Duration) time.Duration {
	return min(max(refusedFor, readmitRetryMin), readmitRetryMax)
}

// markAssigned records on a group that carries the hash of its assigned
// revision which revision it runs and which it waits for: the
// BoundariesApplied condition (True when it runs the current revision)
// and status.boundaries. A group that was marked for another revision
// before gets the BoundariesApplied Event once, when it moves, whoever's
// update carried it there (this fan-out, the InstanceGroup controller
// adding its finalizer, the tenant's own edit: every update is
// re-admitted).
func (r *Reconciler) markAssigned(ctx context.Context, ig *v1alpha1.InstanceGroup, d store.Assignment) (ctrl.Result, error) {
	prevRev := ""
	if ig.Status.Boundaries != nil {
		prevRev = ig.Status.Boundaries.Revision
	}
	prev := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied)
	status, reason := metav1.ConditionTrue, "Current"
	msg := fmt.Sprintf("The spec was computed from the current boundary ConfigMap (revision %s, boundaries hash %s)", d.Revision, d.Hash)
	if d.Pending != "" {
		status, reason = metav1.ConditionFalse, d.Reason
		msg = fmt.Sprintf("The spec was computed from boundaries revision %s (boundaries hash %s); the current revision %s waits: %s",
			d.Revision, d.Hash, d.Pending, heldBecause(d))
	}
	moved := prevRev != "" && prevRev != d.Revision ||
		prevRev == "" && prev != nil && !strings.Contains(prev.Message, d.Hash) // marked before revisions were recorded
	written, res, err := r.setStatus(ctx, ig, &v1alpha1.BoundariesStatus{Revision: d.Revision, PendingRevision: d.Pending, Wave: d.Wave},
		status, reason, msg)
	if written && moved {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonBoundariesApplied, "Readmit",
			"Spec recomputed from boundaries revision %s (boundaries hash %s)", d.Revision, d.Hash)
	}
	return res, err
}

// heldBecause says why a group does not run the current revision.
func heldBecause(d store.Assignment) string {
	switch d.Reason {
	case store.WaitingForWave:
		return "the group's wave of the rollout has not started"
	case store.RolloutHalted:
		return "the rollout halted (see the rollout record ConfigMap and its Events); the admin resumes or rolls back"
	case store.RolledBack:
		return "the group failed in the rollout and was rolled back to the last good revision"
	case store.DeferredByTenant:
		return "its tenant keeps it out of its wave (" + v1alpha1.AnnotationRollout + "=" + v1alpha1.RolloutDefer + "); it moves when the annotation is removed or the deferral's bound passes"
	default:
		return "the rollout of the changed ConfigMap has not started yet"
	}
}

// setCondition writes the BoundariesApplied condition, with an optimistic
// lock so that conditions other controllers wrote meanwhile are kept, and
// reports whether it wrote. A lost race is retried (conflictRetry), never
// dropped.
func (r *Reconciler) setCondition(ctx context.Context, ig *v1alpha1.InstanceGroup, status metav1.ConditionStatus, reason, msg string) (bool, ctrl.Result, error) {
	return r.setStatus(ctx, ig, nil, status, reason, msg)
}

// setStatus is setCondition that also writes status.boundaries, unless b
// is nil.
func (r *Reconciler) setStatus(ctx context.Context, ig *v1alpha1.InstanceGroup, b *v1alpha1.BoundariesStatus, status metav1.ConditionStatus, reason, msg string) (bool, ctrl.Result, error) {
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied); c != nil &&
		c.Status == status && c.Reason == reason && c.Message == msg && c.ObservedGeneration == ig.Generation &&
		(b == nil || ig.Status.Boundaries != nil && *ig.Status.Boundaries == *b) {
		return false, ctrl.Result{}, nil
	}
	patch := client.MergeFromWithOptions(ig.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if b != nil {
		ig.Status.Boundaries = b
	}
	meta.SetStatusCondition(&ig.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionBoundariesApplied, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: ig.Generation,
	})
	err := r.Client.Status().Patch(ctx, ig, patch)
	switch {
	case apierrors.IsConflict(err):
		return false, ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		return false, ctrl.Result{}, nil // deleted meanwhile
	}
	return err == nil, ctrl.Result{}, err
}

// SetupWithManager registers the fan-out with the manager.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	changes := make(chan store.State, 1)
	r.Store.Subscribe(changes)
	events := make(chan event.TypedGenericEvent[*v1alpha1.InstanceGroup])
	// Every valid boundary change enqueues every InstanceGroup.
	if err := mgr.Add(fanOut{client: mgr.GetClient(), changes: changes, out: events}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("readmit").
		// Creates (including the initial list at start) and annotation
		// changes; spec changes go through admission and are current.
		For(&v1alpha1.InstanceGroup{}, builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		WatchesRawSource(source.Channel(events, &handler.TypedEnqueueRequestForObject[*v1alpha1.InstanceGroup]{})).
		// Re-admissions are independent, and each waits on a round trip
		// through the API server and both webhooks: a few at a time keep a
		// fleet-wide change from queueing behind one worker.
		WithOptions(controller.Options{MaxConcurrentReconciles: readmitWorkers}).
		Complete(r)
}

var listBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// fanOut turns each valid boundary change into one event per InstanceGroup.
type fanOut struct {
	client  client.Reader
	changes <-chan store.State
	out     chan<- event.TypedGenericEvent[*v1alpha1.InstanceGroup]
}

func (f fanOut) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.changes:
			igs := &v1alpha1.InstanceGroupList{}
			err := wait.ExponentialBackoffWithContext(ctx, listBackoff, func(ctx context.Context) (bool, error) {
				if err := f.client.List(ctx, igs); err != nil {
					log.FromContext(ctx).Error(err, "listing InstanceGroups for the boundary fan-out; retrying")
					return false, nil
				}
				return true, nil
			})
			if err != nil {
				return nil // cancelled
			}
			for i := range igs.Items {
				select {
				case f.out <- event.TypedGenericEvent[*v1alpha1.InstanceGroup]{Object: &igs.Items[i]}:
				case <-ctx.Done():
					return nil
				}
			}
		}
	}
}
