package instancegroup

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// rotate decides what the pass does about the group's instances: a managed
// group reports the cloud's own update (managedProgress); drifted instances,
// or a last batch whose replacements are not Ready nodes yet, go to the
// upgrade strategy (rotateDrifted, which keeps the slot meanwhile);
// otherwise a surge left by a rollout is given back (settleSurge). Drifted
// instances in Standby are left alone (upgrade.Rotating) and named in the
// message. A failure is UpgradeFailed.
func (r *Reconciler) rotate(ctx context.Context, s *scope) (*ctrl.Result, error) {
	s.progress = upgrade.Counted(s.obs)
	s.progress.Done = true
	var err error
	if !s.obs.Managed {
		// The resume annotation clears a stopped rotation; the next pass
		// rotates, once the provisioner has pointed the group back at the
		// latest version (a batch started now would be replaced from the
		// last good one, which it does not claim).
		resumed, err := r.Rolling.Resume(ctx, s.ig, s.obs)
		if err != nil {
			return end(r.failure(ctx, s.ig, "UpgradeFailed", err))
		}
		if resumed {
			return end(ctrl.Result{RequeueAfter: time.Second}, nil)
		}
	}
	switch {
	case s.obs.Managed:
		s.progress, s.releaseSlot = r.managedProgress(s.ig, s.obs, s.progress)
		err = r.managedStall(ctx, s)
	case upgrade.Rotating(s.ig, s.obs, s.nodes, r.now()):
		if err = r.rotateDrifted(ctx, s); err == nil {
			r.explainDrift(s)
		}
	default:
		err = r.settleSurge(ctx, s)
		if note := upgrade.StandbyNote(s.obs); err == nil && s.progress.Message == "" {
			s.progress.Message = note
		}
	}
	if err != nil {
		return end(r.failure(ctx, s.ig, "UpgradeFailed", err))
	}
	return nil, nil
}

// rotateDrifted runs one step of the group's strategy, unless the group
// must wait (waitToRotate). Outside the maintenance windows a rotation
// under way finishes its batch in flight and starts no other.
func (r *Reconciler) rotateDrifted(ctx context.Context, s *scope) error {
	now := r.now()
	windowWhy, holder, err := r.maintenanceWait(ctx, s.key)
	if err != nil {
		return err
	}
	if err := r.waitToRotate(ctx, s, now, windowWhy, holder); err != nil {
		return err
	}
	if s.progress.Waiting || s.progress.Stopped {
		return nil
	}
	if windowWhy != "" && s.obs.Hold == "" {
		s.obs.Hold = "the batch in flight finishes, then the rotation waits: " + windowWhy
	}
	return r.stepStrategy(ctx, s)
}

// waitToRotate marks the progress Stopped or Waiting when the group may not
// rotate now, first match wins: stopped after replacements that never
// joined; released for a stall (waits one stall timeout); outside the
// maintenance windows without a slot; no upgrade slot free. A group that
// waits gives back what its rotation cordoned (releaseDrains). A group
// (any strategy, crd too) that holds a slot and made no progress for
// StallTimeout is stalled (stall), unless one of its drains waits on a pod
// inside its termination grace period (inGrace).
func (r *Reconciler) waitToRotate(ctx context.Context, s *scope, now time.Time, windowWhy string, holder bool) error {
	ig, obs, key := s.ig, s.obs, s.key
	var err error
	if msg := upgrade.Stopped(ig, obs); msg != "" && ig.Spec.Strategy.Type != v1alpha1.StrategyCRD {
		// Stopped after replacements that never joined: no slot is
		// held, nothing is drained, what the rotation cordoned is
		// given back, until a new launch template version.
		s.progress.Done, s.progress.Stopped, s.progress.Message = false, true, msg
		s.releaseSlot = true
		_, err = r.releaseDrains(ctx, ig, obs, s.nodes)
	} else if at, ok := r.stalledAt(ig, now); ok {
		// Released for lack of progress: wait one stall timeout.
		s.progress.Done, s.progress.Waiting, s.progress.StalledAt = false, true, at
		s.progress.Message = stalledMessage(at, r.StallTimeout)
		_, err = r.releaseDrains(ctx, ig, obs, s.nodes)
	} else if windowWhy != "" && !holder {
		// Outside the maintenance windows no rotation starts: no slot
		// is taken and nothing stays cordoned.
		s.progress.Done, s.progress.Waiting, s.progress.OutsideWindow = false, true, true
		s.progress.Message = "waiting to rotate: " + windowWhy
		_, err = r.releaseDrains(ctx, ig, obs, s.nodes)
	} else if held, aerr := r.Slots.Acquire(ctx, key, ig.UID); aerr != nil || !held {
		s.progress.Done, s.progress.Waiting = false, true
		s.progress.Message = fmt.Sprintf("waiting for an upgrade slot: %d group(s) rotating (%s)", len(r.Slots.Holders()), joinKeys(r.Slots.Holders()))
		err = aerr
		if err == nil {
			// Without a slot no drain of the group runs: none may
			// leave its node cordoned (a restart, a stall).
			_, err = r.releaseDrains(ctx, ig, obs, s.nodes)
		}
	} else if r.StallTimeout > 0 && windowWhy == "" {
		var since time.Time
		if since, err = r.Slots.Progress(ctx, key, progressMarker(obs)); err == nil && now.Sub(since) >= r.StallTimeout {
			// A drain waiting on a pod inside its grace period is
			// progress (inGrace).
			var pod string
			if pod, err = r.inGrace(ctx, drainingNodes(s.nodes), now); err == nil && pod == "" {
				s.progress, err = r.stall(ctx, ig, obs, s.nodes, s.progress, since, now)
			}
		}
	}
	return err
}

// stepStrategy runs one step of the group's strategy (crd, or the rolling
// update through the provisioner's Rotator); the slot is released once the
// rotation is done or stopped, and a stop gives back what it cordoned.
func (r *Reconciler) stepStrategy(ctx context.Context, s *scope) error {
	var err error
	switch s.ig.Spec.Strategy.Type {
	case v1alpha1.StrategyCRD:
		s.progress, err = r.CRD.Step(ctx, s.ig, s.obs)
	default:
		rot, _ := s.prov.(providers.Rotator)
		if rot == nil {
			return fmt.Errorf("provisioner %s cannot rotate instances", s.name)
		}
		s.progress, err = r.Rolling.Step(ctx, s.ig, s.obs, s.nodes, rot)
	}
	if err != nil {
		return err
	}
	s.releaseSlot = s.progress.Done
	if s.progress.Stopped {
		// Stopped in this pass: give back what the rotation cordoned.
		s.releaseSlot = true
		if _, err := r.releaseDrains(ctx, s.ig, s.obs, s.nodes); err != nil {
			return err
		}
	}
	return nil
}

// settleSurge gives back a surge record left by a rollout that ended in
// another pass, or finishes its give-back under way (Settle reads the
// stored record, not this cached one): surge goes back by draining chosen
// nodes and terminating them with a decrement, over several passes, during
// which the group reports Upgrading. The slot is released.
func (r *Reconciler) settleSurge(ctx context.Context, s *scope) error {
	s.releaseSlot = true
	if s.ig.Status.SurgeCapacity <= 0 && s.ig.Status.SurgeBaseCapacity <= 0 && !upgrade.GivingBack(s.obs, s.nodes) {
		return nil
	}
	rot, _ := s.prov.(providers.Rotator)
	msg, err := r.Rolling.Settle(ctx, s.ig, s.obs, s.nodes, rot)
	if err != nil {
		return err
	}
	s.progress.Done, s.progress.Message = msg == "", msg
	return nil
}
