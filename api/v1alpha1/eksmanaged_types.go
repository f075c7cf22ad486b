package v1alpha1

import corev1 "k8s.io/api/core/v1"

// EKSManagedSpec configures the eks-managed provisioner: an EKS managed
// node group.
type EKSManagedSpec struct {
	// MinSize is the node group's minimum size.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MinSize int64 `json:"minSize,omitempty"`
	// MaxSize is the node group's maximum size.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	MaxSize int64 `json:"maxSize,omitempty"`
	// Configuration of the node group.
	// +optional
	Configuration *EKSManagedConfiguration `json:"configuration,omitempty"`
}

// EKSManagedConfiguration maps onto EKS CreateNodegroup.
type EKSManagedConfiguration struct {
	// ClusterName is the EKS cluster.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// InstanceType is the EC2 instance type.
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// InstanceTypes are several instance types (spot capacity); used
	// instead of instanceType when given.
	// +optional
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// VolSize is the node disk size in GiB.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	VolSize int64 `json:"volSize,omitempty"`
	// Labels are Kubernetes labels applied to the nodes.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// NodeLabels is the deprecated name of labels; both are applied, labels
	// winning on conflict.
	// +optional
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// Taints are applied to the nodes.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// NodeRole is the ARN of the node IAM role; when empty the controller
	// creates and owns one.
	// +optional
	NodeRole string `json:"nodeRole,omitempty"`
	// KeyPairName enables SSH remote access with this EC2 key pair.
	// +optional
	KeyPairName string `json:"keyPairName,omitempty"`
	// SecurityGroups are the source security groups allowed remote access.
	// +optional
	SecurityGroups []string `json:"securityGroups,omitempty"`
	// Subnets are subnet ids or values of their Name tag.
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// Tags are applied to the node group, each as {key: ..., value: ...}.
	// +optional
	Tags []map[string]string `json:"tags,omitempty"`
	// AmiType, e.g. AL2_x86_64, AL2023_x86_64_STANDARD, BOTTLEROCKET_x86_64.
	// +optional
	AmiType string `json:"amiType,omitempty"`
	// ReleaseVersion is the AMI release version; empty means the latest.
	// +optional
	ReleaseVersion string `json:"releaseVersion,omitempty"`
	// Version is the Kubernetes version; empty means the cluster's.
	// +optional
	Version string `json:"version,omitempty"`
	// ForceVersionUpdate sends version updates (version, releaseVersion,
	// the launch template's version) with EKS's force flag
	// (UpdateNodegroupVersion force=true): nodes are replaced even when a
	// PodDisruptionBudget keeps their pods from being evicted, instead of
	// the update failing with PodEvictionFailure. Admin-only (a sensitive
	// path, see boundaries.SensitivePaths). Default false.
	// +optional
	ForceVersionUpdate bool `json:"forceVersionUpdate,omitempty"`
	// CapacityType is ON_DEMAND (default) or SPOT.
	// Any case and separator is accepted and normalised by the mutating webhook.
	// +optional
	CapacityType string `json:"capacityType,omitempty"`
}
