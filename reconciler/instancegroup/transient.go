package instancegroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// Defaults of Reconciler.TransientAttempts and TransientGrace.
const (
	defaultTransientAttempts = 5
	defaultTransientGrace    = 5 * time.Minute
)

// failure handles a failed step (reason: ApplyFailed's CloudError,
// NodeRepairFailed, UpgradeFailed) of a reconcile. A transient err
// (providers.IsTransient) that has not yet persisted for TransientAttempts
// attempts and TransientGrace (persistent) leaves the group's state and
// observed generation as they are and sets the Degraded condition with the
// cause (degrade); anything else is an Error (fail). Either way the group
// is retried after the failure backoff.
//
// The run of transient failures (attempts, since when) is stored as
// status.reconcileFailures with the condition, up to TransientAttempts
// attempts (what persistence judges; beyond, the status is not rewritten
// on every retry), and read back when this process has fewer for the
// group (a restart, a new leader), so that a transient failure reaches
// its Error threshold across restarts and the backoff goes on from there.
func (r *Reconciler) failure(ctx context.Context, ig *v1alpha1.InstanceGroup, reason string, err error) (ctrl.Result, error) {
	delay, attempts, since := r.backoff.record(client.ObjectKeyFromObject(ig), ig.Generation, r.now(), ig.Status.ReconcileFailures)
	var run *v1alpha1.ReconcileFailures
	transient := providers.IsTransient(err)
	if transient && attempts <= r.transientAttempts() {
		run = &v1alpha1.ReconcileFailures{Generation: ig.Generation, Attempts: attempts, Since: metav1.NewTime(since.Truncate(time.Second))}
	}
	if transient && !r.persistent(attempts, since) {
		return ctrl.Result{RequeueAfter: delay}, r.degrade(ctx, ig, reason, err, attempts, since, run)
	}
	if ferr := r.failCounted(ctx, ig, reason, err.Error(), run); ferr != nil {
		return ctrl.Result{}, ferr
	}
	return ctrl.Result{RequeueAfter: delay}, nil
}

// persistent reports whether a failure seen attempts times since since has
// lasted both TransientAttempts attempts and TransientGrace.
func (r *Reconciler) persistent(attempts int, since time.Time) bool {
	limit, grace := r.transientAttempts(), r.TransientGrace
	if grace <= 0 {
		grace = defaultTransientGrace
	}
	return attempts >= limit && r.now().Sub(since) >= grace
}

// transientAttempts is TransientAttempts or its default.
func (r *Reconciler) transientAttempts() int {
	if r.TransientAttempts <= 0 {
		return defaultTransientAttempts
	}
	return r.TransientAttempts
}

// degrade records a transient failure: the Degraded condition (reason the
// step's, message the cause without per-call noise and since when), the
// run of failures (status.reconcileFailures, when run is not nil), a Warning Event with the
// full text; the state is left alone.
func (r *Reconciler) degrade(ctx context.Context, ig *v1alpha1.InstanceGroup, reason string, err error, attempts int, since time.Time, run *v1alpha1.ReconcileFailures) error {
	before := ig.DeepCopy()
	if run != nil {
		ig.Status.ReconcileFailures = run
	}
	setCondition(ig, v1alpha1.ConditionDegraded, true, reason, fmt.Sprintf("transient failure, retrying (failing since %s): %s",
		since.UTC().Format(time.RFC3339), stableMessage(err.Error())))
	r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDegraded, "Reconcile", "%s (transient, attempt %d): %v", reason, attempts, err)
	log.FromContext(ctx).Info("reconcile failed for a transient reason; retrying", "reason", reason, "attempt", attempts, "since", since, "error", err.Error())
	return r.patchStatus(ctx, before, ig)
}

// recovered sets Degraded False (reason Recovered) on a group that was
// Degraded; a group never Degraded gets no condition.
func recovered(ig *v1alpha1.InstanceGroup) {
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(ig, v1alpha1.ConditionDegraded, false, ReasonRecovered, "the last reconcile succeeded and no launch of the group is failing")
	}
}
