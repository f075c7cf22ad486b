package v1alpha1

// EKSFargateSpec configures the eks-fargate provisioner: an EKS Fargate
// profile. A profile cannot be changed in place; a change replaces it.
type EKSFargateSpec struct {
	// ClusterName is the EKS cluster.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// PodExecutionRoleArn is the pod execution role; when empty the
	// controller creates and owns one.
	// +optional
	PodExecutionRoleArn string `json:"podExecutionRoleArn,omitempty"`
	// Subnets are private subnet ids for the pods.
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// Selectors choose the pods that run on Fargate.
	// +optional
	Selectors []EKSFargateSelector `json:"selectors,omitempty"`
	// Tags are applied to the profile.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// EKSFargateSelector selects pods by namespace and labels.
type EKSFargateSelector struct {
	// Namespace of the pods.
	Namespace string `json:"namespace"`
	// Labels the pods must carry.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}
