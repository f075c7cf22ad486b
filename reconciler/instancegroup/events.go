package instancegroup

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// The Event reasons (and condition reasons) of the InstanceGroup
// controller, in one place; the admission gate's (ReasonNotAdmitted,
// ReasonBoundariesStale, ReasonBoundariesNotLoaded) are beside it in
// admission_gate.go.

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
	// ReasonDrainBlocked (Warning): a deleted group's node, or a node of
	// an eks-managed node group or Fargate profile being retired, could
	// not be drained within the drain timeout; the drain is retried. A
	// retirement announces each distinct set of blocking pods once.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonForceDelete (Warning): the force-delete annotation makes the
	// deletion skip the drain.
	ReasonForceDelete = "ForceDelete"
	// ReasonFinalizerRemovalFailed (Warning, and the Deleting condition's
	// reason): the API server refused the release of a deleted group's
	// finalizer; the message carries its answer.
	ReasonFinalizerRemovalFailed = "FinalizerRemovalFailed"
)

// ReasonIdentityChanged (Ready condition, Warning Event): the spec names
// another provisioner or cluster than status.identity records; nothing is
// built until the spec is back to the recorded identity or the group is
// deleted (its deletion removes what the recorded identity built). The
// validating webhook refuses such a change, so only a write that bypassed
// it gets here.
const ReasonIdentityChanged = "IdentityChanged"

// ReasonQuotaExceeded: the group was admitted, but builds would take the
// namespace, the cluster or the AWS account past a quota; it is not built.
const ReasonQuotaExceeded = "QuotaExceeded"

// Event reasons of a blue/green replacement (eks-managed: a node group
// replaced after a change EKS cannot make in place).
const (
	// ReasonReplacing: a new cloud resource replaces the group's older
	// ones, deleted once it is ready; the message names them and why.
	ReasonReplacing = "Replacing"
	// ReasonReplaced: the older resources are gone.
	ReasonReplaced = "Replaced"
)

// ReasonSpotRecommendation is the Event reason of spot recommendations
// (the minion-manager convention): involvedObject.name is the Auto Scaling
// group and the message is {"apiVersion":"v1alpha1","spotPrice":"0.0067","useSpot":true}.
const ReasonSpotRecommendation = "SpotRecommendationGiven"

// ReasonUpgradeStalled: the group's rotation made no progress for the
// stall timeout, so its upgrade slot was released (Warning Event, and the
// reason of the Upgrading condition until it asks for a slot again).
const ReasonUpgradeStalled = "UpgradeStalled"

// ReasonFargateEvictionRepeated (Warning): during a Fargate profile's
// replacement a workload's pod created after the replacement evicted one
// of its pods was placed by EKS on a profile being retired (both match
// it, and EKS picks one at random), so it is evicted again. Once per
// workload and replacement; the metric counts every repeat.
const ReasonFargateEvictionRepeated = "FargateEvictionRepeated"

// Reasons of the Degraded condition (v1alpha1.ConditionDegraded).
const (
	// ReasonRecovered: the failure or launch failure that degraded the
	// group is over.
	ReasonRecovered = "Recovered"
	// ReasonDegraded is the Warning Event of a transient failure.
	ReasonDegraded = "Degraded"
	// ReasonLaunchFailed (condition Degraded, Warning Event): the Auto
	// Scaling group of a group below its desired capacity reports failed
	// launches (its latest failed scaling activity's StatusMessage, e.g.
	// InsufficientInstanceCapacity).
	ReasonLaunchFailed = "LaunchFailed"
)

// eventSink records what the provisioner emits (providers.Emit) during
// action ("Reconcile", "Delete") as Events on ig.
func (r *Reconciler) eventSink(ig *v1alpha1.InstanceGroup, action string) providers.EventSink {
	return func(eventType, reason, message string) {
		if r.Recorder != nil {
			r.Recorder.Eventf(ig, nil, eventType, reason, action, "%s", message)
		}
	}
}
