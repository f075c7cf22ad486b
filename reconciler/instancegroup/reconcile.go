package instancegroup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/dryrun"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ig := &v1alpha1.InstanceGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ig); err != nil {
		if apierrors.IsNotFound(err) {
			r.owners.forget(req.NamespacedName)
			if r.backoff != nil {
				r.backoff.forget(req.NamespacedName)
			}
			if r.Rolling != nil && r.Rolling.Drains != nil {
				r.Rolling.Drains.Cancel(req.NamespacedName)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = dryrun.WithObject(ctx, ig) // a dry run's "would …" Events are about the group
	before := ig.DeepCopy()
	name := ig.Spec.Provisioner
	if name == v1alpha1.ProvisionerEKSCF {
		name = v1alpha1.ProvisionerEKS
	}
	prov, ok := r.Provisioners[name]
	if !ok && ig.DeletionTimestamp == nil {
		msg := fmt.Sprintf("spec.provisioner %q is not served by this controller (served: %s)", ig.Spec.Provisioner, strings.Join(slices.Sorted(maps.Keys(r.Provisioners)), ", "))
		return ctrl.Result{}, r.fail(ctx, ig, "UnknownProvisioner", msg)
	}
	if ig.DeletionTimestamp != nil {
		if id, ok := builtIdentity(ig); ok {
			// What is deleted is what the recorded identity built,
			// whatever the spec says now.
			return r.delete(ctx, ig, r.Provisioners[id.Provisioner])
		}
		return r.delete(ctx, ig, prov)
	}
	if controllerutil.AddFinalizer(ig, Finalizer) {
		if err := r.Client.Update(ctx, ig); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		before = ig.DeepCopy()
	}
	if r.Boundaries != nil {
		switch reason, msg := admissionGate(ig, r.Boundaries.Get(), r.AllowNoBoundaries, r.Violations); {
		case reason == "":
		case reason == ReasonBoundariesNotLoaded:
			return ctrl.Result{RequeueAfter: time.Second}, nil
		case reason == ReasonBoundariesStale && !readmissionRefused(ig):
			// The fan-out is on its way (its update brings the group
			// back): wait without a Warning for every group.
			log.FromContext(ctx).V(1).Info("waiting for re-admission", "message", msg)
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		case reason == ReasonNotAdmitted:
			// Re-admit it: the controller's update makes the mutating
			// webhook recompute the spec from the kept submission under
			// the boundaries in force (the fan-out does the same, but only
			// for a hash that differs).
			res, err := r.hold(ctx, ig, reason, msg)
			if err != nil {
				return res, err
			}
			if err := r.Client.Update(ctx, ig); err != nil {
				log.FromContext(ctx).Info("re-admission of a group stored without admission failed; retrying", "error", err.Error())
				return res, nil
			}
			log.FromContext(ctx).Info("re-admitted a group stored without admission")
			return ctrl.Result{}, nil
		default:
			// Unwound first, so that the hold's status write carries the
			// node-health condition too.
			var unwindErr error
			if reason == ReasonBoundariesStale {
				unwindErr = r.unwindHeld(ctx, ig, prov)
			}
			res, err := r.hold(ctx, ig, reason, msg)
			if err == nil {
				err = unwindErr
			}
			return res, err
		}
	}

	if res, held, err := r.quotaGate(ctx, ig); held || err != nil {
		return res, err
	}

	// The identity is stored before the first cloud write (recordIdentity):
	// from then on the webhook refuses a provisioner or cluster switch.
	switch written, err := r.recordIdentity(ctx, ig); {
	case apierrors.IsConflict(err):
		log.FromContext(ctx).Info("the group kept changing while its identity was recorded; retrying", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return r.failure(ctx, ig, "IdentityNotRecorded", err)
	case written:
		before = ig.DeepCopy()
	}
	if msg := identityMismatch(ig); msg != "" {
		if err := r.fail(ctx, ig, ReasonIdentityChanged, msg); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
	}

	if name == v1alpha1.ProvisionerEKS {
		if err := r.applySpotRecommendation(ctx, ig); err != nil {
			return ctrl.Result{}, err
		}
	}
	// eks-managed and eks-fargate ask for an upgrade slot and drains
	// through it before they disrupt pods (see managedProgress).
	obs, err := prov.Apply(providers.WithEvents(providers.WithDisruptions(ctx, groupDisruptions{r: r, ig: ig}), r.eventSink(ig, "Reconcile")), ig)
	if err != nil {
		reason := "CloudError"
		switch {
		case ownership.IsForeign(err):
			reason = ReasonForeignResource
		case providers.IsSpecError(err):
			reason = "InvalidSpec"
		}
		if reason != "CloudError" { // retrying will not help until the spec or the cloud changes
			if ferr := r.fail(ctx, ig, reason, err.Error()); ferr != nil {
				return ctrl.Result{}, ferr
			}
			return ctrl.Result{RequeueAfter: r.ResyncInterval}, r.stallFailing(ctx, ig, reason)
		}
		res, ferr := r.failure(ctx, ig, reason, err)
		if ferr != nil {
			return ctrl.Result{}, ferr
		}
		return res, r.stallFailing(ctx, ig, reason)
	}

	r.owners.set(req.NamespacedName, obs.Instances)
	nodes, err := r.groupNodes(ctx, obs)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Counts of instances, and capacity units (weights) for readiness:
	// Min is in the units the Auto Scaling group counts.
	inService, readyNodes := 0, 0
	units := capacity{}
	for _, in := range obs.Instances {
		if !in.InService() {
			continue
		}
		inService++
		units.inService += in.Units()
		units.weighted = units.weighted || in.Units() != 1
		if n := nodes[in.ProviderID]; n != nil && upgrade.NodeReady(n) {
			readyNodes++
			units.ready += in.Units()
		}
	}

	var healthCheck time.Duration
	if r.NodeHealth != nil && !obs.Managed {
		rot, _ := prov.(providers.Rotator)
		if healthCheck, err = r.NodeHealth.Check(ctx, ig, obs, nodes, rot); err != nil {
			return r.failure(ctx, ig, "NodeRepairFailed", err)
		}
	}

	progress := upgrade.Counted(obs)
	progress.Done = true
	key := req.NamespacedName
	releaseSlot := false // freed by report once the status is stored
	switch {
	case obs.Managed:
		progress, releaseSlot = r.managedProgress(ig, obs, progress)
	case hasDrift(obs):
		now := r.now()
		windowWhy, holder, werr := r.maintenanceWait(ctx, key)
		if werr != nil {
			return r.failure(ctx, ig, "UpgradeFailed", werr)
		}
		if msg := upgrade.Stopped(ig, obs); msg != "" && ig.Spec.Strategy.Type != v1alpha1.StrategyCRD {
			// Stopped after replacements that never joined: no slot is
			// held, nothing is drained, what the rotation cordoned is
			// given back, until a new launch template version.
			progress.Done, progress.Stopped, progress.Message = false, true, msg
			releaseSlot = true
			_, err = r.releaseDrains(ctx, ig, obs, nodes)
		} else if at, ok := r.stalledAt(ig, now); ok {
			// Released for lack of progress: wait one stall timeout.
			progress.Done, progress.Waiting, progress.StalledAt = false, true, at
			progress.Message = stalledMessage(at, r.StallTimeout)
			_, err = r.releaseDrains(ctx, ig, obs, nodes)
		} else if windowWhy != "" && !holder {
			// Outside the maintenance windows no rotation starts: no slot
			// is taken and nothing stays cordoned.
			progress.Done, progress.Waiting, progress.OutsideWindow = false, true, true
			progress.Message = "waiting to rotate: " + windowWhy
			_, err = r.releaseDrains(ctx, ig, obs, nodes)
		} else if held, aerr := r.Slots.Acquire(ctx, key, ig.UID); aerr != nil || !held {
			progress.Done, progress.Waiting = false, true
			progress.Message = fmt.Sprintf("waiting for an upgrade slot: %d group(s) rotating (%s)", len(r.Slots.Holders()), joinKeys(r.Slots.Holders()))
			err = aerr
			if err == nil {
				// Without a slot no drain of the group runs: none may
				// leave its node cordoned (a restart, a stall).
				_, err = r.releaseDrains(ctx, ig, obs, nodes)
			}
		} else if r.StallTimeout > 0 && windowWhy == "" {
			var since time.Time
			if since, err = r.Slots.Progress(ctx, key, progressMarker(obs)); err == nil && now.Sub(since) >= r.StallTimeout {
				progress, err = r.stall(ctx, ig, obs, nodes, progress, since, now)
			}
		}
		if err != nil {
			return r.failure(ctx, ig, "UpgradeFailed", err)
		}
		if progress.Waiting || progress.Stopped {
			break
		}
		if windowWhy != "" && obs.Hold == "" {
			// A rotation under way when the window closed finishes its
			// batch in flight and starts no other.
			obs.Hold = "the batch in flight finishes, then the rotation waits: " + windowWhy
		}
		rot, _ := prov.(providers.Rotator)
		switch ig.Spec.Strategy.Type {
		case v1alpha1.StrategyCRD:
			progress, err = r.CRD.Step(ctx, ig, obs)
		default:
			if rot == nil {
				err = fmt.Errorf("provisioner %s cannot rotate instances", name)
				break
			}
			progress, err = r.Rolling.Step(ctx, ig, obs, nodes, rot)
		}
		if err != nil {
			return r.failure(ctx, ig, "UpgradeFailed", err)
		}
		releaseSlot = progress.Done
		if progress.Stopped {
			// Stopped in this pass: give back what the rotation cordoned.
			releaseSlot = true
			if _, err := r.releaseDrains(ctx, ig, obs, nodes); err != nil {
				return r.failure(ctx, ig, "UpgradeFailed", err)
			}
		}
	default:
		releaseSlot = true
		if ig.Status.SurgeCapacity > 0 || ig.Status.SurgeBaseCapacity > 0 || upgrade.GivingBack(obs, nodes) {
			// A surge record left by a rollout that ended in another pass,
			// or its give-back under way (Settle reads the stored record,
			// not this cached one): surge goes back by draining chosen
			// nodes and terminating them with a decrement, over several
			// passes, during which the group reports Upgrading.
			rot, _ := prov.(providers.Rotator)
			msg, err := r.Rolling.Settle(ctx, ig, obs, nodes, rot)
			if err != nil {
				return r.failure(ctx, ig, "UpgradeFailed", err)
			}
			progress.Done, progress.Message = msg == "", msg
		}
	}

	ready := false
	if obs.Managed {
		ready = obs.Active && !obs.Updating
	} else {
		ready = units.ready >= obs.Min && units.inService >= obs.Min
	}
	res, err := r.report(ctx, before, ig, obs, progress, inService, readyNodes, units, ready, releaseSlot)
	if err == nil && healthCheck > 0 && (res.RequeueAfter == 0 || healthCheck < res.RequeueAfter) {
		res.RequeueAfter = healthCheck // an instance may turn unhealthy before the next resync
	}
	return res, err
}

func hasDrift(obs *providers.Observation) bool {
	for _, in := range obs.Instances {
		if !in.UpToDate {
			return true // terminating ones too: the rotation ends when they are gone
		}
	}
	return false
}
