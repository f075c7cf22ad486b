package eksmanaged

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
)

// Spec paths named in errors.
const (
	specPath   = "spec.eks-managed"
	configPath = specPath + ".configuration"
)

// nodegroupName is the managed node group's name: ownership.Name within
// the 63 characters EKS allows, or, for a group an earlier version created
// (its status records the earlier name), that name.
func nodegroupName(ig *v1alpha1.InstanceGroup) string {
	if legacyNames(ig) {
		return ig.Status.ActiveScalingGroupName
	}
	return ownership.Name(ownership.LimitNodegroup, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
}

// roleName is the node role created when spec.eks-managed.configuration
// .nodeRole is empty (64 characters at most).
func roleName(ig *v1alpha1.InstanceGroup) string {
	if legacyNames(ig) {
		return eks.EKSName(ownership.LimitIAMRole, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
	}
	return ownership.Name(ownership.LimitIAMRole, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
}

// legacyNames: the status records the name an earlier version derived.
func legacyNames(ig *v1alpha1.InstanceGroup) bool {
	st := ig.Status
	return st.Provisioner == v1alpha1.ProvisionerEKSManaged && st.ActiveScalingGroupName != "" &&
		st.ActiveScalingGroupName == eks.EKSName(ownership.LimitNodegroup, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
}

// nodeRole is the role the group creates and owns when the spec names
// none: EC2 trust, the worker node, ECR read-only and (unless the
// irsa-enabled annotation says the CNI has its own role) CNI policies.
func nodeRole(ig *v1alpha1.InstanceGroup) eks.OwnedRole {
	policies := []string{eks.PolicyWorkerNode, eks.PolicyECR}
	if ig.Annotations[v1alpha1.AnnotationIRSAEnabled] != "true" {
		policies = append(policies, eks.PolicyCNI)
	}
	return eks.OwnedRole{
		Name: roleName(ig), Owner: eks.OwnerOf(ig, ig.Spec.EKSManaged.Configuration.ClusterName), TrustPolicy: eks.NodeTrustPolicy,
		Description: "Nodes of the managed node group of InstanceGroup " + eks.Owner(ig) + " (instance-manager)",
		Policies:    policies,
		Field:       configPath + ".nodeRole", Hint: "set nodeRole to its ARN to use it",
	}
}
