package v1alpha1

// GroupIdentity is what decides where an InstanceGroup's cloud resources
// live and under which names: the provisioner ("eks", "eks-managed" or
// "eks-fargate"; "eks-cf" is recorded as "eks") and the EKS cluster.
// Resource names derive from the cluster, the namespace and the name
// (ownership.Name), and the ownership tags from those and the UID; the
// namespace, name and UID never change, so these two fields are the
// whole identity.
type GroupIdentity struct {
	// Provisioner that builds the group's resources.
	Provisioner string `json:"provisioner"`
	// ClusterName is the EKS cluster the resources belong to ("" when
	// the spec named none).
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
}

// SpecIdentity returns the identity spec asks for: its provisioner
// (eks-cf counted as eks) and the cluster name of that provisioner's
// section ("" when the section is absent).
func SpecIdentity(spec *InstanceGroupSpec) GroupIdentity {
	id := GroupIdentity{Provisioner: spec.Provisioner}
	if id.Provisioner == ProvisionerEKSCF {
		id.Provisioner = ProvisionerEKS
	}
	switch id.Provisioner {
	case ProvisionerEKS:
		if spec.EKS != nil && spec.EKS.Configuration != nil {
			id.ClusterName = spec.EKS.Configuration.ClusterName
		}
	case ProvisionerEKSManaged:
		if spec.EKSManaged != nil && spec.EKSManaged.Configuration != nil {
			id.ClusterName = spec.EKSManaged.Configuration.ClusterName
		}
	case ProvisionerEKSFargate:
		if spec.EKSFargate != nil {
			id.ClusterName = spec.EKSFargate.ClusterName
		}
	}
	return id
}

// ClusterNamePath returns the field path of the cluster name for
// provisioner (e.g. "spec.eks.configuration.clusterName"); "" for a
// provisioner this API does not know.
func ClusterNamePath(provisioner string) string {
	switch provisioner {
	case ProvisionerEKS, ProvisionerEKSCF:
		return "spec.eks.configuration.clusterName"
	case ProvisionerEKSManaged:
		return "spec.eks-managed.configuration.clusterName"
	case ProvisionerEKSFargate:
		return "spec.eks-fargate.clusterName"
	}
	return ""
}

// WithIdentity returns a copy of ig whose spec names identity id: its
// provisioner, and the cluster name in that provisioner's section (a
// section created with the cluster name alone when absent). The deletion
// uses it so that what it finds is what was built under the recorded
// identity, whatever the spec says now.
func (ig *InstanceGroup) WithIdentity(id GroupIdentity) *InstanceGroup {
	out := ig.DeepCopy()
	if SpecIdentity(&out.Spec) == id {
		return out
	}
	s := &out.Spec
	s.Provisioner = id.Provisioner
	switch id.Provisioner {
	case ProvisionerEKS:
		if s.EKS == nil {
			s.EKS = &EKSSpec{}
		}
		if s.EKS.Configuration == nil {
			s.EKS.Configuration = &EKSConfiguration{}
		}
		s.EKS.Configuration.ClusterName = id.ClusterName
	case ProvisionerEKSManaged:
		if s.EKSManaged == nil {
			s.EKSManaged = &EKSManagedSpec{}
		}
		if s.EKSManaged.Configuration == nil {
			s.EKSManaged.Configuration = &EKSManagedConfiguration{}
		}
		s.EKSManaged.Configuration.ClusterName = id.ClusterName
	case ProvisionerEKSFargate:
		if s.EKSFargate == nil {
			s.EKSFargate = &EKSFargateSpec{}
		}
		s.EKSFargate.ClusterName = id.ClusterName
	}
	return out
}
