package instancegroup

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// equalStatus ignores condition transition times, which SetStatusCondition
// only changes with the status.
func equalStatus(a, b *v1alpha1.InstanceGroup) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

func joinKeys(keys []types.NamespacedName) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

// fail records an error state with a Warning Event.
func (r *Reconciler) fail(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string) error {
	return r.failCounted(ctx, ig, reason, msg, nil)
}

// failCounted is fail that also stores run as status.reconcileFailures
// (nil: left as it is).
func (r *Reconciler) failCounted(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string, run *v1alpha1.ReconcileFailures) error {
	before := ig.DeepCopy()
	if run != nil {
		ig.Status.ReconcileFailures = run
	}
	ig.Status.CurrentState = v1alpha1.StateError
	ig.Status.ObservedGeneration = ig.Generation
	// The condition holds the message without per-call noise (request
	// ids), so a persistent error is written once; the Event and the log
	// keep the full text.
	setCondition(ig, v1alpha1.ConditionReady, false, reason, stableMessage(msg))
	r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	log.FromContext(ctx).Info("reconcile failed", "reason", reason, "message", msg)
	observeGroup(ig)
	return r.patchStatus(ctx, before, ig)
}

// patchStatus is writeStatus for callers that requeue anyway (errors,
// deletion): a conflict is not an error for them.
func (r *Reconciler) patchStatus(ctx context.Context, before, ig *v1alpha1.InstanceGroup) error {
	_, err := r.writeStatus(ctx, before, ig)
	if errors.Is(err, errStatusConflict) {
		return nil
	}
	return err
}

// errStatusConflict: the status patch lost to a newer version of the group.
var errStatusConflict = errors.New("the InstanceGroup changed while it was reconciled")

// writeStatus patches the status if it changed and reports whether it was
// written; errStatusConflict when a newer version of the group was stored
// meanwhile; a group gone is not an error.
func (r *Reconciler) writeStatus(ctx context.Context, before, ig *v1alpha1.InstanceGroup) (bool, error) {
	if equalStatus(before, ig) {
		return false, nil
	}
	err := r.Client.Status().Patch(ctx, ig, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return false, errStatusConflict
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return err == nil, err
}

func setCondition(ig *v1alpha1.InstanceGroup, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&ig.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: ig.Generation,
	})
}

// conflictRetry is how soon a group whose status write lost a race is
// reconciled again: the write that won may be another controller's status
// write (the fan-out's BoundariesApplied), which does not trigger a
// reconcile, so waiting for the resync would leave a spec change read stale
// until then. (The fan-out has the same delay for the mirror case.)
const conflictRetry = 100 * time.Millisecond
