package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/dryrun"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// Finalizer keeps an InstanceGroup until its cloud resources are gone.
const Finalizer = "instancemgr.keikoproj.io/finalizer"

// Event reasons of the InstanceGroup state machine.
const (
	ReasonApplyFailed  = "ApplyFailed"
	ReasonDeleteFailed = "DeleteFailed"
	ReasonReady        = "Ready"
	ReasonDeleted      = "CloudResourcesDeleted"
	ReasonWaitingSlot  = "WaitingForUpgradeSlot"
	// ReasonWaitingWindow: drifted, and no rotation may start now (outside
	// the maintenance windows, or in a change freeze).
	ReasonWaitingWindow = "WaitingForMaintenanceWindow"
	// ReasonForeignResource: a resource with the name the group needs
	// belongs to someone else (the message names the owner found); it is
	// never changed or deleted.
	ReasonForeignResource = "ForeignResource"
	// ReasonDrainBlocked (Warning): a deleted group's node could not be
	// drained within the drain timeout; the drain is retried.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonForceDelete (Warning): the force-delete annotation makes the
	// deletion skip the drain.
	ReasonForceDelete = "ForceDelete"
	// ReasonFinalizerRemovalFailed (Warning, and the Deleting condition's
	// reason): the API server refused the release of a deleted group's
	// finalizer; the message carries its answer.
	ReasonFinalizerRemovalFailed = "FinalizerRemovalFailed"
)

// InstanceGroupReconciler is the InstanceGroup state machine: it has the
// provisioner converge the cloud resources to the stored (effective) spec,
// judges readiness from instances and their Nodes, hands drifted instances
// to the upgrade strategy (at most Slots.Max groups at once), removes the
// cloud resources on deletion (finalizer), and writes the status and
// conditions that are the user-facing truth.
type InstanceGroupReconciler struct {
	Client client.Client
	// Reader reads what is not cached (spot recommendation Events).
	Reader client.Reader
	// SpotRecommender is the Event source (source.component or
	// reportingController) whose spot recommendations are honoured; empty
	// honours none.
	SpotRecommender string
	// Provisioners by spec.provisioner value ("eks-cf" is served by "eks").
	Provisioners map[string]providers.Provisioner
	Rolling      *upgrade.RollingUpdate
	CRD          *upgrade.CRDStrategy
	// Slots caps the groups rotating at once (upgrade.LeaseSlots in the
	// API server; upgrade.Slots in memory).
	Slots upgrade.SlotKeeper
	// StallTimeout is how long a group holding an upgrade slot may make no
	// rotation progress (progressMarker) before its slot is released
	// (stall); 0: never.
	StallTimeout time.Duration
	// Now returns the current time (tests); default time.Now.
	Now func() time.Time
	// NodeHealth replaces the unhealthy instances of eks groups (nil: off).
	NodeHealth *nodehealth.Repairer
	Recorder   events.EventRecorder
	// PollInterval is how often a group that is converging is re-checked;
	// ResyncInterval how often a Ready group is (new AMIs, outside changes).
	PollInterval   time.Duration
	ResyncInterval time.Duration
	// FailureBackoffBase and FailureBackoffMax space the retries of a
	// group whose reconcile keeps failing (defaults 1s and 5m); see
	// failureBackoff.
	FailureBackoffBase, FailureBackoffMax time.Duration
	// TransientAttempts and TransientGrace: a transient failure
	// (providers.IsTransient) makes the group Degraded, not Error, until
	// it has lasted both (defaults 5 attempts and 5m); see failure.
	TransientAttempts int
	TransientGrace    time.Duration
	// Boundaries, when set, gates every action but deletion on the group
	// having been admitted under the boundaries in force (admissionGate);
	// AllowNoBoundaries is the webhooks' open mode.
	Boundaries        *store.Store
	AllowNoBoundaries bool
	// Violations re-checks a stored spec against the boundaries in force
	// (webhooks.BoundaryViolations); nil checks the hash only.
	Violations Violations
	// Quotas, when set, re-checks the quotas before a group is first
	// built (QuotaCheck); nil: admission's check alone.
	Quotas QuotaCheck

	backoff *failureBackoff
	owners  nodeOwners // provider id -> group, for Nodes without the group's labels
}

// Reconcile implements reconcile.Reconciler.
func (r *InstanceGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
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

func (r *InstanceGroupReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// capacity is the capacity units of a group's in-service instances and of
// those with Ready nodes; weighted when an instance counts for more than 1.
type capacity struct {
	inService, ready int
	weighted         bool
}

func hasDrift(obs *providers.Observation) bool {
	for _, in := range obs.Instances {
		if !in.UpToDate {
			return true // terminating ones too: the rotation ends when they are gone
		}
	}
	return false
}

// report writes the status and conditions and picks the requeue. With
// releaseSlot, the group's upgrade slot is freed once the status saying it
// no longer rotates is stored, not before: a group whose stored status
// still says Upgrading always holds a slot, so users (and tests) never see
// more groups rotating than the cap allows.
func (r *InstanceGroupReconciler) report(ctx context.Context, before, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
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
		if err := r.Slots.Release(ctx, client.ObjectKeyFromObject(ig)); err != nil {
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
	if st.CurrentState == v1alpha1.StateReady {
		return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
	}
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

// hold leaves the group as it is in the cloud and says why in the Ready
// condition (a Warning Event when that reason is new). The fan-out's
// update of the group brings it back; the requeue is a fallback.
func (r *InstanceGroupReconciler) hold(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string) (ctrl.Result, error) {
	before := ig.DeepCopy()
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != reason {
		r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
		log.FromContext(ctx).Info("not acting on the group", "reason", reason, "message", msg)
	}
	setCondition(ig, v1alpha1.ConditionReady, false, reason, msg)
	return ctrl.Result{RequeueAfter: r.PollInterval}, r.patchStatus(ctx, before, ig)
}

// fail records an error state with a Warning Event.
func (r *InstanceGroupReconciler) fail(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string) error {
	return r.failCounted(ctx, ig, reason, msg, nil)
}

// failCounted is fail that also stores run as status.reconcileFailures
// (nil: left as it is).
func (r *InstanceGroupReconciler) failCounted(ctx context.Context, ig *v1alpha1.InstanceGroup, reason, msg string, run *v1alpha1.ReconcileFailures) error {
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
func (r *InstanceGroupReconciler) patchStatus(ctx context.Context, before, ig *v1alpha1.InstanceGroup) error {
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
func (r *InstanceGroupReconciler) writeStatus(ctx context.Context, before, ig *v1alpha1.InstanceGroup) (bool, error) {
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

// groupNodes returns the group's Nodes by providerID (see matchNodes).
func (r *InstanceGroupReconciler) groupNodes(ctx context.Context, obs *providers.Observation) (map[string]*corev1.Node, error) {
	if len(obs.Instances) == 0 {
		return map[string]*corev1.Node{}, nil
	}
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return matchNodes(obs.Instances, list.Items), nil
}

// matchNodes maps each instance's providerID to its Node. A kubelet chooses
// its providerID, so where EC2 gave the instance's private DNS name the
// Node must also carry that name (what the node's credentials are bound
// to); an impostor claiming another instance's providerID is never taken
// for it.
func matchNodes(instances []providers.Instance, nodes []corev1.Node) map[string]*corev1.Node {
	want := map[string]providers.Instance{}
	for _, in := range instances {
		want[in.ProviderID] = in
	}
	out := map[string]*corev1.Node{}
	for i := range nodes {
		n := &nodes[i]
		in, ok := want[n.Spec.ProviderID]
		if !ok || (in.PrivateDNSName != "" && n.Name != in.PrivateDNSName) {
			continue
		}
		out[n.Spec.ProviderID] = n
	}
	return out
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

// SetupWithManager registers the controller. An InstanceGroup is
// reconciled when its spec, labels, annotations, finalizers or deletion
// change, never for a status write (its own would loop); a Node enqueues
// the one group that owns it (by its labels or its provider id, see
// nodeGroup) when something the group judges changes (see nodeChanged),
// not on every heartbeat; a provisioner's shared cloud listing enqueues
// the Ready groups whose cloud resources changed (see watchCloud).
func (r *InstanceGroupReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.backoff = newFailureBackoff(r.FailureBackoffBase, r.FailureBackoffMax)
	cloud, err := r.watchCloud(mgr)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("instancegroup").
		For(&v1alpha1.InstanceGroup{}, builder.WithPredicates(instanceGroupChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeGroup), builder.WithPredicates(nodeChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	if cloud != nil {
		b = b.WatchesRawSource(cloud)
	}
	if r.Rolling != nil && r.Rolling.Drains != nil {
		// A drain that ended (drained, blocked, failed) reconciles its group now.
		b = b.WatchesRawSource(source.Channel(r.Rolling.Drains.Finished(), handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(reconcile.Request{NamespacedName: e.Object})
			},
		}))
	}
	return b.Complete(r)
}

// instanceGroupChanged passes every InstanceGroup event but a status-only
// update.
var instanceGroupChanged = predicate.Or(
	predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
	predicate.LabelChangedPredicate{}, lifecycleChanged)

// lifecycleChanged passes updates that set the deletion timestamp or change
// the finalizers (neither bumps the generation of every kind).
var lifecycleChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}}

// nodeChanged passes Node creates and deletes, and the updates a group
// judges: readiness, cordon, taints, labels, provider id, deletion.
// Heartbeats and image lists do not wake every group.
var nodeChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	before, okOld := e.ObjectOld.(*corev1.Node)
	after, okNew := e.ObjectNew.(*corev1.Node)
	if !okOld || !okNew {
		return true
	}
	return upgrade.NodeReady(before) != upgrade.NodeReady(after) ||
		before.Spec.Unschedulable != after.Spec.Unschedulable ||
		before.Spec.ProviderID != after.Spec.ProviderID ||
		!slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) ||
		!maps.Equal(before.Labels, after.Labels) ||
		!before.DeletionTimestamp.Equal(after.DeletionTimestamp)
}}
