package v1alpha1

// Provisioners: the value of spec.provisioner, naming which section of the
// spec is built and by what.
const (
	// ProvisionerEKS builds an IAM role, a launch template and an Auto
	// Scaling group whose instances join an EKS cluster (spec.eks).
	ProvisionerEKS = "eks"
	// ProvisionerEKSManaged builds an EKS managed node group (spec.eks-managed).
	ProvisionerEKSManaged = "eks-managed"
	// ProvisionerEKSFargate builds an EKS Fargate profile (spec.eks-fargate).
	ProvisionerEKSFargate = "eks-fargate"
	// ProvisionerEKSCF is the CloudFormation provisioner of keikoproj
	// instance-manager < 0.5. It is accepted as a deprecated alias of "eks"
	// and reads spec.eks; admission answers with a warning.
	ProvisionerEKSCF = "eks-cf"
)

// Upgrade strategies: the value of spec.strategy.type.
const (
	// StrategyRollingUpdate rotates drifted instances in batches of
	// maxUnavailable, draining each node through the Eviction API.
	StrategyRollingUpdate = "rollingUpdate"
	// StrategyCRD hands the rotation to a custom resource rendered from
	// spec.strategy.crd.spec and follows its status.
	StrategyCRD = "crd"
	// StrategyManaged leaves rotation to AWS (managed node groups, Fargate).
	StrategyManaged = "managed"
)

// Scaling configuration types: the value of spec.eks.type.
const (
	LaunchTemplate      = "LaunchTemplate"
	LaunchConfiguration = "LaunchConfiguration"
)

// Annotations read or written on InstanceGroups and Namespaces.
const (
	// AnnotationSubmittedSpec holds the tenant's own submission (compact
	// JSON of spec) so the effective spec can be recomputed when the
	// boundaries change. Written only by the controller.
	AnnotationSubmittedSpec = "instancemgr.keikoproj.io/submitted-spec"
	// AnnotationBoundariesHash holds the hash of the boundary inputs the
	// stored effective spec was computed from. Written only by the controller.
	AnnotationBoundariesHash = "instancemgr.keikoproj.io/boundaries-hash"
	// AnnotationConfigExcluded on a Namespace opted its InstanceGroups out
	// of the boundaries in earlier versions. It is no longer read (whoever
	// may annotate a namespace could switch boundaries off): the boundary
	// ConfigMap's excludedNamespaces list replaces it.
	AnnotationConfigExcluded = "instancemgr.keikoproj.io/config-excluded"
	// AnnotationOSFamily selects the bootstrap format of the user data:
	// "amazonlinux2" (default), "amazonlinux2023", "bottlerocket" or "windows".
	AnnotationOSFamily = "instancemgr.keikoproj.io/os-family"
	// AnnotationArchitecture ("x86_64" default, or "arm64") selects the AMI
	// family resolved for image "latest" and "ssm://" references.
	AnnotationArchitecture = "instancemgr.keikoproj.io/arch"
	// AnnotationLockUpgrades, value "true", stops a newly published AMI
	// (image "latest" or "ssm://") from being treated as drift.
	AnnotationLockUpgrades = "instancemgr.keikoproj.io/lock-upgrades"
	// AnnotationIRSAEnabled, value "true", leaves AmazonEKS_CNI_Policy off the
	// node role because the aws-node daemonset uses its own IRSA role.
	AnnotationIRSAEnabled = "instancemgr.keikoproj.io/irsa-enabled"
	// AnnotationClusterAutoscalerEnabled, value "true", adds the
	// cluster-autoscaler auto-discovery and node-template tags to the group.
	AnnotationClusterAutoscalerEnabled = "instancemgr.keikoproj.io/cluster-autoscaler-enabled"
	// AnnotationClusterAutoscalerPriority, a non-negative integer, is the
	// group's priority for the cluster-autoscaler's priority expander (the
	// higher, the sooner it is scaled up): with
	// --cluster-autoscaler-priority-configmap the controller keeps that
	// ConfigMap listing every group by its priority, so an overflow order
	// (spot before on-demand, preferred types before others) is stated on
	// the groups.
	AnnotationClusterAutoscalerPriority = "instancemgr.keikoproj.io/cluster-autoscaler-priority"
	// AnnotationForceDelete, value "true", makes the deletion of the group
	// remove its cloud resources without draining its nodes (their pods
	// are killed without eviction; PodDisruptionBudgets are not asked).
	// It may be set before or during the deletion.
	AnnotationForceDelete = "instancemgr.keikoproj.io/force-delete"
	// AnnotationResumeRotation, any value, resumes a rolling update that
	// stopped because MaxNeverJoined replacements never became Ready nodes
	// (RotationStopped), for a cause that has passed (an Availability
	// Zone impairment, a VPC endpoint outage): the controller forgets the
	// replacements that never joined, launches from the group's latest
	// launch template version again, and removes the annotation. It does
	// nothing to a rotation that is not stopped (it is removed then too).
	AnnotationResumeRotation = "instancemgr.keikoproj.io/resume-rotation"
	// AnnotationRollout is a tenant's choice of when its group takes part
	// in a boundaries rollout: RolloutApprove or RolloutDefer, where the
	// boundary ConfigMap's rollout.tenants allows it (the validating
	// webhook refuses it otherwise; the rollout ignores what the policy
	// does not allow). It stays until removed and applies to every rollout
	// while it is there.
	AnnotationRollout = "instancemgr.keikoproj.io/rollout"
)

// Values of AnnotationRollout.
const (
	// RolloutApprove moves the group to the rollout's target now, ahead
	// of its wave; it is judged alone and cannot halt the rollout.
	RolloutApprove = "approve"
	// RolloutDefer keeps the group out of its wave until the annotation
	// is removed, and at most rollout.tenants.deferUpTo after the wave
	// started.
	RolloutDefer = "defer"
)

// Node labels the eks provisioner registers through the kubelet, naming the
// InstanceGroup a node belongs to.
const (
	LabelInstanceGroup          = "instancemgr.keikoproj.io/instancegroup"
	LabelInstanceGroupNamespace = "instancemgr.keikoproj.io/namespace"
)

// OS families, the values of AnnotationOSFamily.
const (
	OSFamilyAmazonLinux2    = "amazonlinux2"
	OSFamilyAmazonLinux2023 = "amazonlinux2023"
	OSFamilyBottlerocket    = "bottlerocket"
	OSFamilyWindows         = "windows"
)

// Condition types in status.conditions.
const (
	// ConditionReady is True when the group's cloud resources match the spec
	// and at least minSize instances are InService with Ready nodes.
	ConditionReady = "Ready"
	// ConditionNodesReady is True when every InService instance has a Ready node.
	ConditionNodesReady = "NodesReady"
	// ConditionUpgrading is True while drifted nodes are being rotated.
	ConditionUpgrading = "Upgrading"
	// ConditionNodesHealthy is False while instances are unhealthy (no
	// Ready node within the startup timeout, or NotReady past the unhealthy
	// timeout): reason Repairing while they are replaced, RepairHalted when
	// more than 20% of the group is unhealthy and replacement stops.
	ConditionNodesHealthy = "NodesHealthy"
	// ConditionBoundariesApplied is True when the stored spec was computed
	// from the current boundary ConfigMap (the boundaries-hash matches).
	ConditionBoundariesApplied = "BoundariesApplied"
	// ConditionDeleting is True while a deleted group drains its nodes and
	// removes its cloud resources: reason Draining, DrainBlocked (a drain
	// past the drain timeout, retried; the message names the nodes and
	// pods), ForceDelete (the force-delete annotation skips the drain) or
	// DeletingCloudResources.
	ConditionDeleting = "Deleting"
	// ConditionDegraded is True while the group's reconcile fails for a
	// transient reason (throttling, an AWS or API server error, EC2 eventual
	// consistency, IAM propagation: providers.IsTransient), with the cause
	// in its message and the attempt count and first failure time; the
	// group keeps its last good state and is retried with backoff. Only a
	// failure that persists for --transient-error-attempts attempts and
	// --transient-error-grace makes the state Error. Reason
	// InsufficientCapacity (with the Auto Scaling group's latest failed
	// scaling activity) while a converging group stays below its desired
	// capacity because its launches fail. False (reason Recovered) once a
	// reconcile succeeds and launches succeed again.
	ConditionDegraded = "Degraded"
)

// States in status.currentState, as printed by `kubectl get ig`.
const (
	StateInit          = "Init"
	StateModifying     = "ReconcileModifying"
	StateModified      = "ReconcileModified"
	StateInitUpgrade   = "InitUpgrade"
	StateUpgrading     = "Upgrading"
	StateReady         = "Ready"
	StateDeleting      = "Deleting"
	StateDeleted       = "Deleted"
	StateError         = "Error"
	LifecycleNormal    = "normal"
	LifecycleSpot      = "spot"
	LifecycleMixed     = "mixed"
	DefaultVolumeSize  = 32 // GiB, the root volume when none is given
	DefaultCRDRetries  = 3  // spec.strategy.crd.maxRetries when unset
	ConcurrencyForbid  = "forbid"
	ConcurrencyReplace = "replace"
	ConcurrencyAllow   = "allow"
)
