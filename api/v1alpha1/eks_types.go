package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EKSSpec configures the eks provisioner: an Auto Scaling group whose
// instances bootstrap into an EKS cluster.
type EKSSpec struct {
	// MinSize is the group's minimum number of instances.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MinSize int64 `json:"minSize,omitempty"`

	// MaxSize is the group's maximum number of instances.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MaxSize int64 `json:"maxSize,omitempty"`

	// Type is LaunchTemplate (default) or LaunchConfiguration. Launch
	// configurations are deprecated by AWS; the value is accepted for
	// compatibility and the group is built from a launch template.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Type string `json:"type,omitempty"`

	// WarmPool keeps pre-initialized instances stopped beside the group.
	// +optional
	WarmPool *WarmPoolSpec `json:"warmPool,omitempty"`

	// Configuration is the launch and scaling configuration.
	// +optional
	Configuration *EKSConfiguration `json:"configuration,omitempty"`

	// NodeHealth replaces instances whose nodes do not become Ready or stop
	// being Ready (docs/autoscaling.md, "Node health"). Defaults apply when
	// absent.
	// +optional
	NodeHealth *NodeHealthSpec `json:"nodeHealth,omitempty"`
}

// NodeHealthSpec is when an instance counts as unhealthy and how many are
// replaced at once. An unhealthy instance is terminated through its Auto
// Scaling group without decrementing the desired capacity, so the group
// launches a replacement; replacement halts while more than 20% of the
// group's instances (rounded up) are unhealthy at once, which points at a
// bad image or configuration rather than bad luck.
type NodeHealthSpec struct {
	// StartupTimeout is how long after its launch an instance may run
	// without a Ready node (booting, joining). Default 15m.
	// +optional
	StartupTimeout *metav1.Duration `json:"startupTimeout,omitempty"`

	// UnhealthyTimeout is how long a node may stay NotReady (or Unknown)
	// before its instance is replaced. Default 5m.
	// +optional
	UnhealthyTimeout *metav1.Duration `json:"unhealthyTimeout,omitempty"`

	// MaxReplacing is how many instances of the group may be replaced at
	// once: a count, or a percentage of the group's instances rounded up.
	// Default "10%" (at least 1). 0 turns replacement off (unhealthy
	// instances are still reported).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxReplacing *intstr.IntOrString `json:"maxReplacing,omitempty"`
}

// WarmPoolSpec configures the Auto Scaling group's warm pool.
type WarmPoolSpec struct {
	// MinSize is the minimum number of warm instances.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MinSize int64 `json:"minSize,omitempty"`
	// MaxSize is the maximum of instances in the group plus the warm pool;
	// -1 means the group's maxSize.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MaxSize int64 `json:"maxSize,omitempty"`
}

// EKSConfiguration is how instances are launched and join the cluster.
type EKSConfiguration struct {
	// ClusterName is the name of the EKS cluster the nodes join.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// Image is the AMI: an id (ami-...), "latest" (the EKS-optimized AMI
	// for the cluster's version, OS family and architecture, resolved
	// through SSM) or an SSM parameter reference ("ssm://<parameter name>").
	// +optional
	Image string `json:"image,omitempty"`

	// ResolvedImage is the AMI id that Image ("latest" or "ssm://...")
	// resolves to in the boundaries revision the group was admitted
	// against: admission writes it from the revision's pins, so that a
	// newly published AMI or a control-plane upgrade reaches the group
	// only when its rollout wave moves it. Tenants and the boundary
	// ConfigMap cannot set it; empty when Image is an AMI id or the
	// revision pins nothing for it (the controller then reads SSM).
	// +optional
	ResolvedImage string `json:"resolvedImage,omitempty"`

	// InstanceType is the EC2 instance type, e.g. m5.large.
	// +optional
	InstanceType string `json:"instanceType,omitempty"`

	// KeyPairName is the EC2 key pair for SSH access.
	// +optional
	KeyPairName string `json:"keyPairName,omitempty"`

	// Subnets are subnet ids or values of the subnets' Name tag.
	// +optional
	Subnets []string `json:"subnets,omitempty"`

	// SecurityGroups are security group ids or values of their Name tag.
	// +optional
	SecurityGroups []string `json:"securityGroups,omitempty"`

	// VolSize is the root volume size in GiB when volumes is empty. Default 32.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	VolSize int64 `json:"volSize,omitempty"`

	// Volumes are the EBS volumes attached at launch, by device name.
	// +optional
	Volumes []NodeVolume `json:"volumes,omitempty"`

	// Taints are registered on each node by the kubelet.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// Labels are registered on each node by the kubelet.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Tags are applied to the Auto Scaling group and propagated to its
	// instances, each as {key: <tag key>, value: <tag value>}.
	// +optional
	Tags []map[string]string `json:"tags,omitempty"`

	// TagSpecifications tag, at launch, the resources each instance's
	// launch creates: the launch template's TagSpecifications (EC2 API
	// Reference, LaunchTemplateTagSpecificationRequest). resourceType is
	// one of instance, volume, network-interface, spot-instances-request;
	// tags are as in tags ({key, value}). Keys reserved by AWS (aws:) and
	// by instance-manager's ownership and cluster tags are refused, as in
	// tags. A change is a new launch template version (the nodes rotate).
	// keikoproj instance-manager's field.
	// +optional
	TagSpecifications []TagSpecification `json:"tagSpecifications,omitempty"`

	// BootstrapArguments are extra arguments for the bootstrap script,
	// e.g. "--kubelet-extra-args=--v=2" (amazonlinux2).
	// +optional
	BootstrapArguments string `json:"bootstrapArguments,omitempty"`

	// BootstrapOptions are structured bootstrap settings.
	// +optional
	BootstrapOptions *BootstrapOptions `json:"bootstrapOptions,omitempty"`

	// UserData are scripts run before or after the bootstrap.
	// +optional
	UserData []UserDataStage `json:"userData,omitempty"`

	// SpotPrice, when set, is the maximum hourly price in USD (e.g. "0.67")
	// and the group runs spot instances.
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?)?$`
	// +optional
	SpotPrice string `json:"spotPrice,omitempty"`

	// RoleName is an existing IAM role for the nodes; when empty the
	// controller creates and owns one.
	// +optional
	RoleName string `json:"roleName,omitempty"`

	// InstanceProfileName is the existing instance profile of RoleName;
	// when empty the controller creates and owns one.
	// +optional
	InstanceProfileName string `json:"instanceProfileName,omitempty"`

	// ManagedPolicies are extra IAM policies (names or ARNs) attached to a
	// role the controller creates, beside the standard worker policies.
	// +optional
	ManagedPolicies []string `json:"managedPolicies,omitempty"`

	// MixedInstancesPolicy runs several instance types and on-demand/spot
	// capacity in one group.
	// +optional
	MixedInstancesPolicy *MixedInstancesPolicySpec `json:"mixedInstancesPolicy,omitempty"`

	// LifecycleHooks are Auto Scaling lifecycle hooks created on the group.
	// +optional
	LifecycleHooks []LifecycleHookSpec `json:"lifecycleHooks,omitempty"`

	// MetricsCollection are Auto Scaling group metrics to enable
	// (GroupMinSize, GroupDesiredCapacity, ..., or All).
	// +optional
	MetricsCollection []string `json:"metricsCollection,omitempty"`

	// SuspendProcesses are Auto Scaling processes to suspend (Launch,
	// Terminate, AZRebalance, HealthCheck, ..., or All).
	// +optional
	SuspendProcesses []string `json:"suspendProcesses,omitempty"`

	// MetadataOptions configures the instance metadata service.
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// LicenseSpecifications are ARNs of license configurations.
	// +optional
	LicenseSpecifications []string `json:"licenseSpecifications,omitempty"`

	// Placement places instances on hosts or in a zone.
	// +optional
	Placement *PlacementSpec `json:"placement,omitempty"`
}

// NodeVolume is an EBS volume attached at launch.
type NodeVolume struct {
	// Name is the device name, e.g. /dev/xvda.
	Name string `json:"name"`
	// Type is the EBS volume type: gp2, gp3, io1, io2, st1, sc1 or standard.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Type string `json:"type,omitempty"`
	// Size is the volume size in GiB; not with snapshotId.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	Size int64 `json:"size,omitempty"`
	// Iops is the provisioned IOPS (io1, io2, gp3).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	Iops int64 `json:"iops,omitempty"`
	// Throughput is the provisioned throughput in MiB/s (gp3).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	Throughput int64 `json:"throughput,omitempty"`
	// SnapshotID creates the volume from a snapshot; not with size.
	// +optional
	SnapshotID string `json:"snapshotId,omitempty"`
	// DeleteOnTermination deletes the volume with the instance. Default true.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume with the account's default KMS key.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// MountOptions formats and mounts the volume from the user data.
	// +optional
	MountOptions *NodeVolumeMountOptions `json:"mountOptions,omitempty"`
}

// NodeVolumeMountOptions formats and mounts an additional volume at boot.
type NodeVolumeMountOptions struct {
	// FileSystem is xfs or ext4.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	FileSystem string `json:"fileSystem,omitempty"`
	// Mount is the mount path.
	// +optional
	Mount string `json:"mount,omitempty"`
	// Persistance keeps the mount across reboots through /etc/fstab.
	// Default true. (The spelling is the original API's.)
	// +optional
	Persistance *bool `json:"persistance,omitempty"`
}

// BootstrapOptions are structured settings for the node bootstrap.
type BootstrapOptions struct {
	// MaxPods is the kubelet's max-pods; 0 keeps the AMI's default.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MaxPods int64 `json:"maxPods,omitempty"`
	// ContainerRuntime is the runtime for amazonlinux2 (containerd).
	// +optional
	ContainerRuntime string `json:"containerRuntime,omitempty"`
}

// UserDataStage is a script the node runs around its bootstrap.
type UserDataStage struct {
	// Name identifies the stage; merged by name under the boundaries.
	// +optional
	Name string `json:"name,omitempty"`
	// Stage is PreBootstrap or PostBootstrap.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Stage string `json:"stage,omitempty"`
	// Data is the script, plain text or base64.
	// +optional
	Data string `json:"data,omitempty"`
}

// MixedInstancesPolicySpec mixes instance types and purchase options.
type MixedInstancesPolicySpec struct {
	// Strategy is the spot allocation strategy: CapacityOptimized (default),
	// LowestPrice or PriceCapacityOptimized.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Strategy string `json:"strategy,omitempty"`
	// SpotPools is how many spot pools LowestPrice spreads over. Default 2.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	SpotPools *int64 `json:"spotPools,omitempty"`
	// BaseCapacity is the on-demand capacity always present. Default 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	BaseCapacity *int64 `json:"baseCapacity,omitempty"`
	// SpotRatio is the percentage of capacity above BaseCapacity that runs
	// as spot, as a number (60) or percent string ("60%"). Default 0.
	// +kubebuilder:validation:XIntOrString
	// +optional
	SpotRatio *intstr.IntOrString `json:"spotRatio,omitempty"`
	// InstancePool derives instance types from the base instanceType:
	// SubFamilyFlexible (same family, generation, vCPUs, memory and
	// architecture, resolved from EC2 DescribeInstanceTypes). Required
	// when instanceTypes is empty.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	InstancePool string `json:"instancePool,omitempty"`
	// InstanceTypes are the types the group may launch, with weights.
	// +optional
	InstanceTypes []InstanceTypeSpec `json:"instanceTypes,omitempty"`
}

// TagSpecification is the tags for one type of resource an instance's
// launch creates.
type TagSpecification struct {
	// ResourceType is instance, volume, network-interface or
	// spot-instances-request.
	ResourceType string `json:"resourceType"`
	// Tags, each as {key: <tag key>, value: <tag value>}.
	// +optional
	Tags []map[string]string `json:"tags,omitempty"`
}

// TagSpecificationResourceTypes are the resource types a launch
// template's tag specifications may name (EC2 API Reference,
// LaunchTemplateTagSpecificationRequest).
var TagSpecificationResourceTypes = []string{"instance", "volume", "network-interface", "spot-instances-request"}

// InstancePoolSubFamilyFlexible is the instancePool that derives the
// instance types from the base instanceType: its family and generation
// (m5 for m5.xlarge: m5, m5a, m5ad, m5d, m5dn, m5n, m5zn) with the same
// vCPUs, memory and processor architecture, as EC2 DescribeInstanceTypes
// reports them for the region.
const InstancePoolSubFamilyFlexible = "SubFamilyFlexible"

// SubFamilyOf splits an instance type into the family letters and the
// generation SubFamilyFlexible groups by: m5ad.xlarge -> m, 5; c7gn.large
// -> c, 7. ok is false for names without both (u-6tb1.metal, mac1).
func SubFamilyOf(instanceType string) (family, generation string, ok bool) {
	class, _, found := strings.Cut(instanceType, ".")
	if !found {
		return "", "", false
	}
	i := 0
	for i < len(class) && class[i] >= 'a' && class[i] <= 'z' {
		i++
	}
	j := i
	for j < len(class) && class[j] >= '0' && class[j] <= '9' {
		j++
	}
	if i == 0 || j == i || j < len(class) && class[j] != '-' && (class[j] < 'a' || class[j] > 'z') {
		return "", "", false
	}
	return class[:i], class[i:j], true
}

// MaxInstanceWeight is the largest weight Auto Scaling accepts.
const MaxInstanceWeight = 999

// Weighted reports whether the policy gives its instance types weights:
// the group's sizes and desired capacity are then capacity units.
func (m *MixedInstancesPolicySpec) Weighted() bool {
	if m == nil {
		return false
	}
	for _, t := range m.InstanceTypes {
		if t.Weight > 0 {
			return true
		}
	}
	return false
}

// PartialWeight returns the index of the first instance type without a
// weight when another has one (Auto Scaling needs a weight on every type
// or on none).
func (m *MixedInstancesPolicySpec) PartialWeight() (int, bool) {
	if !m.Weighted() {
		return 0, false
	}
	for i, t := range m.InstanceTypes {
		if t.Weight <= 0 {
			return i, true
		}
	}
	return 0, false
}

// InstanceTypeSpec is one instance type of a mixed instances policy.
type InstanceTypeSpec struct {
	// Type is the EC2 instance type.
	Type string `json:"type"`
	// Weight is the capacity units one instance of this type counts for
	// (1 to 999). Either every instance type has a weight or none does;
	// with weights, minSize, maxSize, the desired capacity, maxUnavailable
	// and maxSurge are capacity units, as Auto Scaling counts them.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=999
	// +optional
	Weight int64 `json:"weight,omitempty"`
}

// LifecycleHookSpec is an Auto Scaling lifecycle hook.
type LifecycleHookSpec struct {
	// Name of the hook.
	Name string `json:"name"`
	// Lifecycle is launch or terminate.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Lifecycle string `json:"lifecycle,omitempty"`
	// DefaultResult when the heartbeat times out: abandon (default) or continue.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	DefaultResult string `json:"defaultResult,omitempty"`
	// HeartbeatTimeout in seconds, 30 to 7200. Default 300.
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=7200
	// +optional
	HeartbeatTimeout int64 `json:"heartbeatTimeout,omitempty"`
	// NotificationArn is an SNS topic or SQS queue ARN to notify.
	// +optional
	NotificationArn string `json:"notificationArn,omitempty"`
	// RoleArn is an IAM role allowed to publish to NotificationArn.
	// +optional
	RoleArn string `json:"roleArn,omitempty"`
	// Metadata is added to the notification.
	// +optional
	Metadata string `json:"metadata,omitempty"`
}

// MetadataOptions configures the instance metadata service (IMDS).
// +kubebuilder:validation:XValidation:rule="!has(self.httpPutHopLimit)",message="httpPutHopLimit is keikoproj instance-manager's name of httpPutResponseHopLimit; instance-manager's mutating webhook moves it there, so it cannot be stored: is the MutatingWebhookConfiguration installed?"
type MetadataOptions struct {
	// HttpEndpoint is enabled (default) or disabled.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	HttpEndpoint string `json:"httpEndpoint,omitempty"`
	// HttpTokens is required (IMDSv2 only) or optional.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	HttpTokens string `json:"httpTokens,omitempty"`
	// HttpPutResponseHopLimit is the hop limit of IMDS responses, 1 to 64.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HttpPutResponseHopLimit int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HttpPutHopLimit is keikoproj instance-manager's name of
	// httpPutResponseHopLimit, accepted so that its manifests apply
	// unchanged: the mutating webhook moves the value to
	// httpPutResponseHopLimit (both set to different values is refused), so
	// it is never stored.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HttpPutHopLimit int64 `json:"httpPutHopLimit,omitempty"`
}

// PlacementSpec places instances.
type PlacementSpec struct {
	// AvailabilityZone to launch in. (The original API spelled it
	// availabiltyZone; that spelling is not accepted.)
	// +optional
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// HostResourceGroupArn launches on hosts of a resource group.
	// +optional
	HostResourceGroupArn string `json:"hostResourceGroupArn,omitempty"`
	// Tenancy is default, dedicated or host.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	Tenancy string `json:"tenancy,omitempty"`
}
