package instancegroup

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// gateAdmission acts only on a group admitted under the boundaries in
// force (admissionGate): with boundaries not loaded yet it waits; a stale
// group waits for the fan-out without a Warning; a group stored without
// admission is re-admitted by an update; any other verdict holds the
// group as it is in the cloud (hold), after giving back what a stale one's
// rotation cordoned (unwindHeld).
func (r *Reconciler) gateAdmission(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if r.Boundaries == nil {
		return nil, nil
	}
	ig := s.ig
	switch reason, msg := admissionGate(ig, r.Boundaries.Get(), r.AllowNoBoundaries, r.Violations); {
	case reason == "":
		return nil, nil
	case reason == ReasonBoundariesNotLoaded:
		return end(ctrl.Result{RequeueAfter: time.Second}, nil)
	case reason == ReasonBoundariesStale && !readmissionRefused(ig):
		// The fan-out is on its way (its update brings the group
		// back): wait without a Warning for every group.
		log.FromContext(ctx).V(1).Info("waiting for re-admission", "message", msg)
		return end(ctrl.Result{RequeueAfter: r.PollInterval}, nil)
	case reason == ReasonNotAdmitted:
		// Re-admit it: the controller's update makes the mutating
		// webhook recompute the spec from the kept submission under
		// the boundaries in force (the fan-out does the same, but only
		// for a hash that differs).
		res, err := r.hold(ctx, ig, reason, msg)
		if err != nil {
			return end(res, err)
		}
		if err := r.Client.Update(ctx, ig); err != nil {
			log.FromContext(ctx).Info("re-admission of a group stored without admission failed; retrying", "error", err.Error())
			return end(res, nil)
		}
		log.FromContext(ctx).Info("re-admitted a group stored without admission")
		return end(ctrl.Result{}, nil)
	default:
		// Unwound first, so that the hold's status write carries the
		// node-health condition too.
		var unwindErr error
		if reason == ReasonBoundariesStale {
			unwindErr = r.unwindHeld(ctx, ig, s.prov)
		}
		res, err := r.hold(ctx, ig, reason, msg)
		if err == nil {
			err = unwindErr
		}
		return end(res, err)
	}
}

// gateQuota holds a group not yet built whose build would pass a quota
// (quotaGate).
func (r *Reconciler) gateQuota(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if res, held, err := r.quotaGate(ctx, s.ig); held || err != nil {
		return end(res, err)
	}
	return nil, nil
}
