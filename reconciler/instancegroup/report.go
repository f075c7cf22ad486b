package instancegroup

import (
	"context"
	"errors"
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
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// capacity is the capacity units of a group's in-service instances and of
// those with Ready nodes; weighted when an instance counts for more than 1.
type capacity struct {
	inService, ready int
	weighted         bool
}

// report writes the status and conditions and picks the requeue. With
// releaseSlot, the group's upgrade slot is freed once the status saying it
// no longer rotates is stored, not before: a group whose stored status
// still says Upgrading always holds a slot, so users (and tests) never see
// more groups rotating than the cap allows.
func (r *Reconciler) report(ctx context.Context, before, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	progress upgrade.Progress, inService, readyNodes int, units capacity, ready, releaseSlot bool) (ctrl.Result, error) {
	st := &ig.Status
	st.ObservedGeneration = ig.Generation
	st.CurrentMin, st.CurrentMax = obs.Min, obs.Max
	st.ActiveScalingGroupName = obs.GroupName
	st.RetiringScalingGroupNames = obs.Retiring
	st.ActiveLaunchTemplateName = obs.LaunchTemplateName
	st.LatestTemplateVersion = obs.LatestTemplateVersion
	st.NodesInstanceRoleArn = obs.RoleARN
	st.Lifecycle = obs.Lifecycle
	st.Provisioner = ig.Spec.Provisioner
	st.Strategy = ig.Spec.Strategy.Type
	st.NodesUpdated, st.NodesTotal = progress.Updated, progress.Total
	st.NodesInService, st.NodesReady = inService, readyNodes
	st.CreateFailure = obs.CreateFailure
	st.ReconcileFailures = nil // this pass succeeded
	r.setDrainDeadline(ctx, ig)

	setCondition(ig, v1alpha1.ConditionNodesReady, readyNodes == inService && inService > 0 || obs.Managed && obs.Active,
		"NodesReady", fmt.Sprintf("%d of %d in-service instance(s) have Ready nodes", readyNodes, inService))
	switch {
	case progress.Done:
		setCondition(ig, v1alpha1.ConditionUpgrading, false, "UpToDate",
			fmt.Sprintf("%d of %d instance(s) on the latest launch template version", progress.Updated, progress.Total))
	case progress.Stopped:
		setCondition(ig, v1alpha1.ConditionUpgrading, false, upgrade.ReasonRotationStopped,
			fmt.Sprintf("%d of %d updated: %s", progress.Updated, progress.Total, progress.Message))
	case progress.Waiting && !progress.StalledAt.IsZero():
		setCondition(ig, v1alpha1.ConditionUpgrading, false, ReasonUpgradeStalled,
			fmt.Sprintf("%d of %d updated: %s", progress.Updated, progress.Total, progress.Message))
		// The transition time is the stall's: the group asks for a slot
		// again one stall timeout after it (stalledAt).
		meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionUpgrading).LastTransitionTime = metav1.NewTime(progress.StalledAt.Truncate(time.Second))
	case progress.Waiting && progress.OutsideWindow:
		setCondition(ig, v1alpha1.ConditionUpgrading, false, ReasonWaitingWindow,
			fmt.Sprintf("%d of %d updated: %s", progress.Updated, progress.Total, progress.Message))
	case progress.Waiting:
		setCondition(ig, v1alpha1.ConditionUpgrading, false, "WaitingForUpgradeSlot",
			fmt.Sprintf("%d of %d updated: %s", progress.Updated, progress.Total, progress.Message))
	default:
		setCondition(ig, v1alpha1.ConditionUpgrading, true, "Rotating",
			fmt.Sprintf("%d of %d updated: %s", progress.Updated, progress.Total, progress.Message))
	}
	switch {
	case progress.Stopped:
		st.CurrentState = v1alpha1.StateError
	case progress.Waiting:
		st.CurrentState = v1alpha1.StateInitUpgrade
	case !progress.Done:
		st.CurrentState = v1alpha1.StateUpgrading
	case ready:
		st.CurrentState = v1alpha1.StateReady
	default:
		st.CurrentState = v1alpha1.StateModifying
	}
	readyMsg := fmt.Sprintf("%d instance(s) in service with %d Ready node(s); minSize %d", inService, readyNodes, obs.Min)
	if units.weighted {
		readyMsg = fmt.Sprintf("%d instance(s) in service (%d capacity units) with %d Ready node(s) (%d units); minSize %d units",
			inService, units.inService, readyNodes, units.ready, obs.Min)
	}
	if obs.Managed {
		readyMsg = "the cloud reports the group active"
		if obs.Message != "" {
			readyMsg = obs.Message
		}
	}
	if obs.LaunchFailure != "" {
		readyMsg += "; launches fail: " + obs.LaunchFailure
	}
	launchFailed(ig, obs.LaunchFailure)
	// Ready is about capacity: a group rotating with its nodes Ready is
	// Ready (its state says Upgrading).
	setCondition(ig, v1alpha1.ConditionReady, ready, map[bool]string{true: "Ready", false: "NotReady"}[ready], readyMsg)

	written, err := r.writeStatus(ctx, before, ig)
	if err == nil {
		observeGroup(ig)
	}
	if errors.Is(err, errStatusConflict) {
		// The group changed during this pass. The change may be a status
		// write of another controller (the fan-out's BoundariesApplied),
		// which does not trigger a reconcile, so run again now rather than
		// at the resync: a spec change read stale here would wait for it.
		// (conflictRetry: the fan-out's, for the mirror case.)
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if releaseSlot {
		reason := slots.ReasonDone
		if progress.Stopped {
			reason = slots.ReasonStopped
		}
		if err := r.Slots.Release(ctx, client.ObjectKeyFromObject(ig), reason); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.backoff.succeeded(client.ObjectKeyFromObject(ig), ig.Generation)
	if written {
		r.replacementEvents(before, ig, obs)
		r.launchFailureEvent(before, ig, obs)
	}
	if written && st.CurrentState == v1alpha1.StateReady && before.Status.CurrentState != v1alpha1.StateReady {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonReady, "Reconcile", "Group %s is Ready: %s", obs.GroupName, readyMsg)
	}
	r.waiters.set(client.ObjectKeyFromObject(ig), progress.Waiting)
	if st.CurrentState == v1alpha1.StateReady {
		return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
	}
	if progress.Waiting {
		return ctrl.Result{RequeueAfter: r.waitingRequeue()}, nil
	}
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

// hold leaves the group as it is in the cloud and says why in the Ready
// condition (a Warning Event when that reason is new). The fan-out's
// update of the group brings it back; the requeue is a fallback.
func (r *Reconciler) hold(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string) (ctrl.Result, error) {
	before := ig.DeepCopy()
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != reason {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
		log.FromContext(ctx).Info("not acting on the group", "reason", reason, "message", msg)
	}
	setCondition(ig, v1alpha1.ConditionReady, false, reason, msg)
	return ctrl.Result{RequeueAfter: r.PollInterval}, r.patchStatus(ctx, before, ig)
}
