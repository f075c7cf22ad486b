package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// InstanceGroup is a group of worker nodes built and kept by one provisioner:
// an Auto Scaling group (eks), an EKS managed node group (eks-managed) or an
// EKS Fargate profile (eks-fargate). The stored spec is the effective spec:
// the tenant's submission combined with the cluster's boundary ConfigMap at
// admission time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=instancegroups,scope=Namespaced,shortName=ig;igs,categories=all
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="Current state of the group"
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.status.currentMin`,description="Minimum size currently set on the group"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.status.currentMax`,description="Maximum size currently set on the group"
// +kubebuilder:printcolumn:name="Group Name",type=string,JSONPath=`.status.activeScalingGroupName`,description="Name of the Auto Scaling group, node group or profile in AWS"
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisioner`,description="Provisioner building the group"
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.strategy.type`,description="Upgrade strategy"
// +kubebuilder:printcolumn:name="Lifecycle",type=string,JSONPath=`.status.lifecycle`,description="normal (on-demand), spot or mixed"
// +kubebuilder:printcolumn:name="Boundaries",type=string,JSONPath=`.status.boundaries.revision`,description="Revision of the boundary ConfigMap the spec was computed from"
// +kubebuilder:printcolumn:name="Pending",type=string,JSONPath=`.status.boundaries.pendingRevision`,priority=1,description="Newer boundaries revision the group waits for (its rollout wave has not started, the rollout halted, or it was rolled back)"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodesTotal`,priority=1,description="Instances in the group (kubectl get -o wide)"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.nodesUpdated`,priority=1,description="Instances on the latest launch template version (kubectl get -o wide)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InstanceGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InstanceGroupSpec   `json:"spec,omitempty"`
	Status InstanceGroupStatus `json:"status,omitempty"`
}

// InstanceGroupList is a list of InstanceGroups.
//
// +kubebuilder:object:root=true
type InstanceGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InstanceGroup `json:"items"`
}

// InstanceGroupSpec is what the group should be. Exactly the section named by
// provisioner is used; admission rejects a spec whose section is missing.
type InstanceGroupSpec struct {
	// Provisioner names what builds the group: eks (an Auto Scaling group),
	// eks-managed (an EKS managed node group) or eks-fargate (a Fargate
	// profile). eks-cf is accepted as a deprecated alias of eks.
	// Usually supplied by the boundary ConfigMap's defaults.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Provisioner string `json:"provisioner,omitempty"`

	// Strategy is how nodes are replaced when a change needs new instances
	// (image, instance type, user data, ...).
	// +optional
	Strategy AwsUpgradeStrategy `json:"strategy,omitzero"`

	// EKS configures the eks provisioner.
	// +optional
	EKS *EKSSpec `json:"eks,omitempty"`

	// EKSManaged configures the eks-managed provisioner.
	// +optional
	EKSManaged *EKSManagedSpec `json:"eks-managed,omitempty"`

	// EKSFargate configures the eks-fargate provisioner.
	// +optional
	EKSFargate *EKSFargateSpec `json:"eks-fargate,omitempty"`
}

// AwsUpgradeStrategy selects and configures the upgrade strategy.
type AwsUpgradeStrategy struct {
	// Type is rollingUpdate (drain and replace in batches), crd (submit a
	// custom resource that performs the rotation) or managed (AWS rotates:
	// required for eks-managed and eks-fargate).
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Type string `json:"type,omitempty"`

	// RollingUpdate configures the rollingUpdate strategy.
	// +optional
	RollingUpdate *RollingUpdateStrategy `json:"rollingUpdate,omitempty"`

	// CRD configures the crd strategy.
	// +optional
	CRD *CRDUpgradeStrategy `json:"crd,omitempty"`
}

// RollingUpdateStrategy rotates drifted instances a batch at a time.
type RollingUpdateStrategy struct {
	// MaxUnavailable is how many nodes may be drained and replaced at once:
	// a count (1) or a percentage of the group's desired capacity ("30%",
	// rounded down, at least 1). Default 1.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many extra instances may be launched above the desired
	// capacity before old ones are drained: a count or a percentage of the
	// desired capacity (rounded up). Default 0 (replace in place).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// CRDUpgradeStrategy hands rotation to a custom resource, such as
// upgrade-manager's RollingUpgrade or an Argo Workflow.
type CRDUpgradeStrategy struct {
	// CRDName is the plural resource name of the submitted kind, e.g.
	// "rollingupgrades"; used to check the kind exists before submitting.
	// +optional
	CRDName string `json:"crdName,omitempty"`

	// Spec is the YAML manifest to submit. String values may hold the
	// placeholders ${.metadata.name}, ${.metadata.namespace},
	// ${.status.activeScalingGroupName}, ${.status.activeLaunchTemplateName}
	// and ${.status.latestTemplateVersion}, e.g.
	// "asgName: ${.status.activeScalingGroupName}"; Go templates are
	// refused. Its kind and fields are bounded by the boundary ConfigMap's
	// crdStrategy.
	// +optional
	Spec string `json:"spec,omitempty"`

	// StatusJSONPath locates the status string in the submitted resource,
	// in gjson form ("status.currentStatus") or the seed's leading-dot form
	// (".status.currentStatus").
	// +optional
	StatusJSONPath string `json:"statusJSONPath,omitempty"`

	// StatusSuccessString is the value at StatusJSONPath that means the
	// rotation succeeded (compared case-insensitively).
	// +optional
	StatusSuccessString string `json:"statusSuccessString,omitempty"`

	// StatusFailureString is the value at StatusJSONPath that means the
	// rotation failed (compared case-insensitively).
	// +optional
	StatusFailureString string `json:"statusFailureString,omitempty"`

	// ConcurrencyPolicy is what to do when an earlier resource is still
	// running: forbid (wait for it, the default), replace (delete it and
	// submit a new one) or allow (submit another). Case-insensitive.
	// +optional
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`

	// MaxRetries is how often a failed resource is resubmitted before the
	// group goes to the Error state; -1 retries forever. Default 3.
	// +kubebuilder:validation:Minimum=-1
	// +optional
	MaxRetries *int `json:"maxRetries,omitempty"`
}

// InstanceGroupStatus is what the controller observed and did.
type InstanceGroupStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// CurrentState is the state of the reconcile state machine: Init,
	// ReconcileModifying, ReconcileModified, InitUpgrade, Upgrading, Ready,
	// Deleting, Deleted or Error.
	// +optional
	CurrentState string `json:"currentState,omitempty"`

	// CurrentMin is the minimum size set on the group in AWS.
	// +optional
	CurrentMin int `json:"currentMin,omitempty"`

	// CurrentMax is the maximum size set on the group in AWS.
	// +optional
	CurrentMax int `json:"currentMax,omitempty"`

	// ActiveScalingGroupName is the name of the Auto Scaling group (eks),
	// node group (eks-managed) or Fargate profile (eks-fargate).
	// +optional
	ActiveScalingGroupName string `json:"activeScalingGroupName,omitempty"`

	// RetiringScalingGroupNames are the group's older EKS managed node
	// groups (eks-managed) that ActiveScalingGroupName replaces after a
	// change EKS cannot make in place: once ActiveScalingGroupName is
	// ACTIVE with Ready nodes the controller drains their nodes (Eviction
	// API, PodDisruptionBudgets, maxUnavailable at once) and then deletes
	// them. Empty when no replacement is in progress.
	// +optional
	RetiringScalingGroupNames []string `json:"retiringScalingGroupNames,omitempty"`

	// ActiveLaunchTemplateName is the launch template the group launches from.
	// +optional
	ActiveLaunchTemplateName string `json:"activeLaunchTemplateName,omitempty"`

	// LatestTemplateVersion is the launch template version matching the spec.
	// +optional
	LatestTemplateVersion string `json:"latestTemplateVersion,omitempty"`

	// NodesInstanceRoleArn is the ARN of the IAM role the nodes run as.
	// +optional
	NodesInstanceRoleArn string `json:"nodesInstanceRoleArn,omitempty"`

	// Lifecycle is normal (on-demand), spot or mixed.
	// +optional
	Lifecycle string `json:"lifecycle,omitempty"`

	// Provisioner is the provisioner that built the group.
	// +optional
	Provisioner string `json:"provisioner,omitempty"`

	// Identity is where the group's cloud resources live (provisioner and
	// cluster), recorded by the controller before its first cloud write
	// and never changed afterwards: the validating webhook refuses a
	// change of spec.provisioner or of the cluster name once it is set,
	// and the deletion finds the resources through it. Absent: nothing
	// was built (or the group predates the record; the controller
	// records it on its next pass).
	// +optional
	Identity *GroupIdentity `json:"identity,omitempty"`

	// Strategy is the upgrade strategy in effect.
	// +optional
	Strategy string `json:"strategy,omitempty"`

	// StrategyResourceName is the custom resource submitted by the crd strategy.
	// +optional
	StrategyResourceName string `json:"strategyResourceName,omitempty"`

	// StrategyRetryCount is how many times the crd strategy resubmitted.
	// +optional
	StrategyRetryCount int `json:"strategyRetryCount,omitempty"`

	// UsingSpotRecommendation is true while the spot price comes from a
	// spot recommendation Event rather than the spec.
	// +optional
	UsingSpotRecommendation bool `json:"usingSpotRecommendation,omitempty"`

	// SpotRecommendationPrice is the spot price (USD per hour) the last
	// followed recommendation gave; "" means it said on-demand.
	// +optional
	SpotRecommendationPrice string `json:"spotRecommendationPrice,omitempty"`

	// NodesUpdated is how many of the group's instances were launched from
	// a launch template version with the desired content (whatever its
	// number); with NodesTotal it shows upgrade progress.
	// +optional
	NodesUpdated int `json:"nodesUpdated,omitempty"`

	// NodesTotal is how many instances the group has.
	// +optional
	NodesTotal int `json:"nodesTotal,omitempty"`

	// NodesInService is how many of the group's instances are InService
	// (Auto Scaling lifecycle state).
	// +optional
	NodesInService int `json:"nodesInService,omitempty"`

	// NodesReady is how many of its InService instances have a Ready
	// node; the NodesReady condition is True when it equals a non-zero
	// NodesInService. A progressive rollout judges a group healthy only
	// when every InService instance has a Ready node (see docs/upgrades.md,
	// Progressive rollouts).
	// +optional
	NodesReady int `json:"nodesReady,omitempty"`

	// SurgeCapacity is the capacity (instances, or units with weights) the
	// rollingUpdate strategy added to the desired capacity for maxSurge and
	// has not given back yet; 0 when no surge is in progress. A surge adds
	// to the desired capacity as it is at that moment and gives back
	// exactly this much, so changes others (the cluster-autoscaler) make
	// meanwhile are kept.
	// +optional
	SurgeCapacity int `json:"surgeCapacity,omitempty"`

	// SurgeReturn names the instance whose termination with a capacity
	// decrement is giving back part of SurgeCapacity. It is written before
	// the Auto Scaling call and cleared after it, so a controller that
	// stopped in between tells from the instance's state whether the
	// capacity went back (instance terminating or gone) or not (still in
	// service), instead of giving it back twice or never.
	// +optional
	SurgeReturn *SurgeReturn `json:"surgeReturn,omitempty"`

	// RotationBatch is the rollingUpdate strategy's record of its batch in
	// flight: the replacements it asked Auto Scaling for and which
	// instances are them, so the next batch waits for this batch's own
	// replacements to become Ready nodes, not for the group's totals
	// (which a replacement removed with a capacity decrement, e.g. by the
	// cluster-autoscaler's cleanup of unregistered nodes, would satisfy).
	// Nil when no batch waits.
	// +optional
	RotationBatch *RotationBatch `json:"rotationBatch,omitempty"`

	// SurgeBaseCapacity was the desired capacity before a surge, written by
	// earlier versions; it is read once (as SurgeCapacity = desired - it)
	// and cleared.
	// Deprecated: see SurgeCapacity.
	// +optional
	SurgeBaseCapacity int `json:"surgeBaseCapacity,omitempty"`

	// CreateFailure records the group's EKS managed node group
	// (eks-managed) or Fargate profile (eks-fargate) that ended in
	// CREATE_FAILED, which EKS never retries: the controller deletes it
	// after a backoff (30 s doubling per failed creation in a row, up to
	// 15 min) and creates it again. Kept in the status so that a restarted
	// controller, or a new leader, continues the backoff instead of
	// deleting the resource at once. Nil once the resource is ACTIVE.
	// +optional
	CreateFailure *CreateFailure `json:"createFailure,omitempty"`

	// ReconcileFailures records the run of failed reconciles the group is
	// in (cleared by the next successful one): a transient failure
	// (throttling, eventual consistency) leaves the group Degraded until
	// the run has lasted both the controller's transient attempts and
	// grace, and the retries are spaced by the failure backoff from it.
	// Kept in the status so that a restarted controller, or a new leader,
	// continues the run instead of starting it again.
	// +optional
	ReconcileFailures *ReconcileFailures `json:"reconcileFailures,omitempty"`

	// DrainDeadline is the admin's drain deadline (boundary ConfigMap
	// data.drains) as it applies to the group's nodes being drained now:
	// past a node's deadline its drain deletes the pods it could not
	// evict. Nil while none of the group's nodes drains, or no deadline
	// applies to the group (drains then wait for every eviction).
	// +optional
	DrainDeadline *DrainDeadline `json:"drainDeadline,omitempty"`

	// Boundaries says which revision of the boundary ConfigMap the spec
	// was computed from, and which newer one the group waits for while a
	// progressive rollout holds it back.
	// +optional
	Boundaries *BoundariesStatus `json:"boundaries,omitempty"`

	// Conditions: Ready, NodesReady, NodesHealthy, Upgrading, BoundariesApplied.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SurgeReturn is a surge give-back in flight: one instance terminated with
// a decrement of the desired capacity.
type SurgeReturn struct {
	// InstanceID is the EC2 instance id being terminated.
	InstanceID string `json:"instanceID"`
	// Capacity is the capacity (instances, or units with weights) its
	// termination gives back.
	Capacity int `json:"capacity"`
}

// MaxNeverJoined is how many consecutive replacements may fail to become
// Ready nodes before a rolling update stops (RotationBatch.NeverJoined).
const MaxNeverJoined = 3

// StoppedAt reports whether the record says the rotation to launch
// template version stopped: MaxNeverJoined consecutive replacements
// launched from it never joined. False for a nil record or another version.
func (b *RotationBatch) StoppedAt(version string) bool {
	return b != nil && b.LaunchTemplateVersion == version && len(b.NeverJoined) >= MaxNeverJoined
}

// RotationBatch is a rotation batch's replacements (status.rotationBatch).
// Capacities are instances, or capacity units with weights.
type RotationBatch struct {
	// LaunchTemplateVersion is the latest launch template version when the
	// batch started; a newer one starts the record afresh.
	LaunchTemplateVersion string `json:"launchTemplateVersion"`
	// Since is when the batch first asked for a replacement (its first
	// termination without a capacity decrement, or its maxSurge
	// scale-out).
	Since metav1.Time `json:"since"`
	// Existing are the ids of the instances on the latest version that the
	// group held at Since: they are never claimed. Any other instance on
	// the latest version is claimed as a replacement (by instance id, not
	// launch time, so no clock is compared with EC2's).
	// +optional
	Existing []string `json:"existing,omitempty"`
	// Owed is the capacity of the replacements the batch waits for.
	Owed int `json:"owed,omitempty"`
	// Pending are the instance ids claimed as replacements whose nodes are
	// not Ready yet.
	// +optional
	Pending []string `json:"pending,omitempty"`
	// Joined are the instance ids of replacements whose nodes became
	// Ready, worth JoinedCapacity.
	// +optional
	Joined         []string `json:"joined,omitempty"`
	JoinedCapacity int      `json:"joinedCapacity,omitempty"`
	// NeverJoined are the instance ids of consecutive replacements that
	// never became Ready nodes (none within the node startup timeout, or
	// gone before); a replacement that joins clears it. At three the
	// rotation stops.
	// +optional
	NeverJoined []string `json:"neverJoined,omitempty"`
}

// CreateFailure is a node group or Fargate profile in CREATE_FAILED
// (status.createFailure).
type CreateFailure struct {
	// Name is the EKS managed node group or Fargate profile.
	Name string `json:"name"`
	// CreatedAt is EKS's creation time (createdAt) of the failed
	// incarnation last seen, at second precision: a resource created again
	// that fails again has another one, and counts as one more failure.
	CreatedAt metav1.Time `json:"createdAt"`
	// Since is when the controller first saw that incarnation in
	// CREATE_FAILED; it is deleted one backoff after.
	Since metav1.Time `json:"since"`
	// Attempts counts the failed incarnations in a row, the last one
	// included (1 or more).
	Attempts int `json:"attempts"`
}

// ReconcileFailures is a run of failed reconciles of a group
// (status.reconcileFailures).
type ReconcileFailures struct {
	// Generation is the metadata.generation the run failed at; a spec
	// change starts a new run.
	Generation int64 `json:"generation"`
	// Attempts counts the failed reconciles of the run (1 or more).
	Attempts int `json:"attempts"`
	// Since is when the run's first failure happened.
	Since metav1.Time `json:"since"`
}

// BoundariesStatus is the boundaries revision of a group (see the boundary
// ConfigMap's rollout policy).
type BoundariesStatus struct {
	// Revision names the revision of the boundary ConfigMap the stored
	// spec was computed from: the first hex digits of a SHA-256 of its
	// data (the rollout key left out).
	// +optional
	Revision string `json:"revision,omitempty"`

	// PendingRevision is the boundary ConfigMap's newer revision the group
	// waits for: its wave of the rollout has not started, the rollout
	// halted, or the group was rolled back. Empty when the group runs the
	// current revision.
	// +optional
	PendingRevision string `json:"pendingRevision,omitempty"`

	// Wave names the group's wave in the rollout of the current revision,
	// once that wave started.
	// +optional
	Wave string `json:"wave,omitempty"`
}

// DrainDeadline is the drain deadline in force for a group's drains.
type DrainDeadline struct {
	// After is the deadline (a duration such as "30m0s"), counted from each
	// node's drain start (its instancemgr.keikoproj.io/drain-started
	// annotation): the group's namespace's entry of data.drains.namespaces,
	// else data.drains.deadline.
	After metav1.Duration `json:"after"`

	// Nodes are the group's nodes being drained, sorted by name, each with
	// the time its deadline passes.
	// +optional
	Nodes []NodeDrainDeadline `json:"nodes,omitempty"`
}

// NodeDrainDeadline is when the drain of one node passes its deadline.
type NodeDrainDeadline struct {
	// Node is the Node's name.
	Node string `json:"node"`

	// At is the node's drain start plus DrainDeadline.After: from then on
	// the drain deletes the pods whose eviction is refused or fails (with
	// a grace period of at most 60 s), each named in a Warning Event
	// (reason DrainDeadlinePodDeleted) on the Node and the InstanceGroup.
	At metav1.Time `json:"at"`
}
