package eksmanaged

import (
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Spec paths named in errors.
const (
	specPath   = "spec.eks-managed"
	configPath = specPath + ".configuration"
)

// shapeHashLen is the number of hex digits of the shape hash ending the
// name of a replacement node group.
const shapeHashLen = 8

// nodegroupName is the name of the group's first managed node group:
// ownership.Name within the 63 characters EKS allows, or, for a group an
// earlier version created (its status records a node group of the earlier
// scheme), that scheme's name. A node group created to replace another
// (see replacementName) has another name.
func nodegroupName(ig *v1alpha1.InstanceGroup) string {
	c := ig.Spec.EKSManaged.Configuration
	if legacyNames(ig) {
		return ownership.EKSName(ownership.LimitNodegroup, c.ClusterName, ig.Namespace, ig.Name)
	}
	return ownership.Name(ownership.LimitNodegroup, c.ClusterName, ig.Namespace, ig.Name)
}

// replacementName is the node group that replaces the group's node group
// when a field EKS cannot change does: the group's prefix (ownership.Name,
// or the earlier scheme's for a group of an earlier version, within what
// the hash leaves of 63 characters), "-" and the hash of the shape, so a
// restart names the same node group and a changed shape a new one.
func replacementName(ig *v1alpha1.InstanceGroup, s shape) string {
	return replacementPrefixes(ig)[0] + "-" + s.hash()
}

// replacementPrefixes are the prefixes of ig's replacement node group
// names, the one in use first (the earlier scheme's for a group of an
// earlier version), then the other.
func replacementPrefixes(ig *v1alpha1.InstanceGroup) []string {
	c := ig.Spec.EKSManaged.Configuration
	limit := ownership.LimitNodegroup - shapeHashLen - 1
	current, legacy := ownership.Name(limit, c.ClusterName, ig.Namespace, ig.Name), ownership.EKSName(limit, c.ClusterName, ig.Namespace, ig.Name)
	if legacyNames(ig) {
		return []string{legacy, current}
	}
	return []string{current, legacy}
}

// ownName reports whether a node group name can be one of ig's: its first
// node group's name or a replacement name, of this version's scheme or the
// earlier one's. Only such node groups are described; their ownership tags
// decide whether they are ig's.
func ownName(ig *v1alpha1.InstanceGroup) func(string) bool {
	c := ig.Spec.EKSManaged.Configuration
	bases := []string{ownership.Name(ownership.LimitNodegroup, c.ClusterName, ig.Namespace, ig.Name),
		ownership.EKSName(ownership.LimitNodegroup, c.ClusterName, ig.Namespace, ig.Name)}
	prefixes := replacementPrefixes(ig)
	return func(name string) bool {
		for _, b := range bases {
			if name == b {
				return true
			}
		}
		for _, p := range prefixes {
			if isReplacement(name, p) {
				return true
			}
		}
		return false
	}
}

// isReplacement: name is prefix, "-" and a shape hash.
func isReplacement(name, prefix string) bool {
	if len(name) != len(prefix)+1+shapeHashLen || !strings.HasPrefix(name, prefix+"-") {
		return false
	}
	for _, c := range name[len(prefix)+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// roleName is the node role created when spec.eks-managed.configuration
// .nodeRole is empty (64 characters at most).
func roleName(ig *v1alpha1.InstanceGroup) string {
	if legacyNames(ig) {
		return ownership.EKSName(ownership.LimitIAMRole, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
	}
	return ownership.Name(ownership.LimitIAMRole, ig.Spec.EKSManaged.Configuration.ClusterName, ig.Namespace, ig.Name)
}

// legacyNames: the status records a node group of the scheme an earlier
// version used, its first one or a replacement of it.
func legacyNames(ig *v1alpha1.InstanceGroup) bool {
	st := ig.Status
	if st.Provisioner != v1alpha1.ProvisionerEKSManaged || st.ActiveScalingGroupName == "" {
		return false
	}
	c := ig.Spec.EKSManaged.Configuration
	return st.ActiveScalingGroupName == ownership.EKSName(ownership.LimitNodegroup, c.ClusterName, ig.Namespace, ig.Name) ||
		isReplacement(st.ActiveScalingGroupName, ownership.EKSName(ownership.LimitNodegroup-shapeHashLen-1, c.ClusterName, ig.Namespace, ig.Name))
}

// nodeRole is the role the group creates and owns when the spec names
// none: EC2 trust, the worker node and ECR read-only policies, and the
// CNI policy only as iamrole.CNIPolicy says (cni: --node-role-cni-policy).
func nodeRole(ig *v1alpha1.InstanceGroup, cni bool) iamrole.OwnedRole {
	policies := append([]string{iamrole.PolicyWorkerNode, iamrole.PolicyECR}, iamrole.CNIPolicy(ig, cni)...)
	return iamrole.OwnedRole{
		Name: roleName(ig), Owner: ownership.OwnerOf(ig, ig.Spec.EKSManaged.Configuration.ClusterName), TrustPolicy: iamrole.NodeTrustPolicy,
		Description: "Nodes of the managed node group of InstanceGroup " + ownership.GroupTag(ig) + " (instance-manager)",
		Policies:    policies,
		Field:       configPath + ".nodeRole", Hint: "set nodeRole to its ARN to use it",
	}
}
