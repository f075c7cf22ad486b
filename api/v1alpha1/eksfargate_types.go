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
	// Tags are applied to the profile: a map of strings. keikoproj
	// instance-manager's form, a list of maps ([{key1: v1}, {key2: v2}]),
	// is accepted too: the mutating webhook merges it into one map (a key
	// set twice with different values is refused). Only the map is stored:
	// the validating webhook refuses any other shape (the API server does
	// not type this field, as it takes two shapes, and cannot check it with
	// a CEL rule either).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
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
