package eks

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

const (
	// versionDescriptionPrefix starts the launch template data hash kept
	// in the version description, so drift is one string compare.
	versionDescriptionPrefix = "instance-manager:"
)

func ownerOf(ig *v1alpha1.InstanceGroup) ownership.Owner {
	return ownership.OwnerOf(ig, ig.Spec.EKS.Configuration.ClusterName)
}

// legacyNames reports whether ig was built by a controller version that
// named resources "<cluster>-<namespace>-<name>" (its status records that
// name): such a group keeps its names, so an upgrade renames nothing and
// rotates no node. The status can only choose between the two derived
// names, and ownership is checked on every resource either way.
func legacyNames(ig *v1alpha1.InstanceGroup) bool {
	st := ig.Status
	return st.ActiveScalingGroupName != "" && st.ActiveScalingGroupName == legacyName(ig, ownership.LimitLaunchTemplate) &&
		(st.Provisioner == "" || st.Provisioner == v1alpha1.ProvisionerEKS || st.Provisioner == v1alpha1.ProvisionerEKSCF)
}

// GroupName is the Auto Scaling group and launch template name of ig:
// ownership.Name within the 128 characters a launch template name allows,
// or the name its status records for a group of an earlier version.
func GroupName(ig *v1alpha1.InstanceGroup) string {
	if legacyNames(ig) {
		return ig.Status.ActiveScalingGroupName
	}
	c := ig.Spec.EKS.Configuration
	return ownership.Name(ownership.LimitLaunchTemplate, c.ClusterName, ig.Namespace, ig.Name)
}

func groupName(ig *v1alpha1.InstanceGroup) string { return GroupName(ig) }

// RoleName is the IAM role and instance profile created for ig (64
// characters at most, the IAM role limit).
func RoleName(ig *v1alpha1.InstanceGroup) string {
	if legacyNames(ig) {
		return legacyName(ig, ownership.LimitIAMRole)
	}
	c := ig.Spec.EKS.Configuration
	return ownership.Name(ownership.LimitIAMRole, c.ClusterName, ig.Namespace, ig.Name)
}

func roleName(ig *v1alpha1.InstanceGroup) string { return RoleName(ig) }

// legacyName is the name earlier versions derived: not collision-free
// (acme/web-blue and acme-web/blue gave the same), kept only for groups
// that already carry it.
func legacyName(ig *v1alpha1.InstanceGroup, n int) string {
	return bounded(fmt.Sprintf("%s-%s-%s", ig.Spec.EKS.Configuration.ClusterName, ig.Namespace, ig.Name), n)
}

// bounded shortens s to n characters, keeping it unique with a hash suffix.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:8]
	return s[:n-len(suffix)-1] + "-" + suffix
}

// CandidateRoleNames are the names a node role created for (cluster,
// namespace, name) may carry: the current scheme's and the earlier one's.
// Whoever deletes by these names must check ownership (iamrole.DeleteOwnedRole
// does).
func CandidateRoleNames(cluster, namespace, name string) []string {
	return []string{
		ownership.Name(ownership.LimitIAMRole, cluster, namespace, name),
		bounded(fmt.Sprintf("%s-%s-%s", cluster, namespace, name), ownership.LimitIAMRole),
	}
}
