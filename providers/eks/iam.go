package eks

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// nodePolicies are the policy ARNs a created role carries: the worker
// policies (AmazonEKS_CNI_Policy only as iamrole.CNIPolicy says, with cni the
// --node-role-cni-policy flag) plus spec.eks.configuration.managedPolicies
// (names or ARNs).
func nodePolicies(ig *v1alpha1.InstanceGroup, cni bool) []string {
	out := append([]string{iamrole.PolicyWorkerNode, iamrole.PolicyECR, iamrole.PolicySSM}, iamrole.CNIPolicy(ig, cni)...)
	for _, p := range ig.Spec.EKS.Configuration.ManagedPolicies {
		if !strings.HasPrefix(p, "arn:") {
			p = "arn:aws:iam::aws:policy/" + p
		}
		out = append(out, p)
	}
	return out
}

// byoRole reports whether the spec brings its own role and profile.
func byoRole(ig *v1alpha1.InstanceGroup) bool {
	return ig.Spec.EKS.Configuration.RoleName != ""
}

// nodeRole is the role and instance profile the group creates when the
// spec brings none; cni as for nodePolicies.
func nodeRole(ig *v1alpha1.InstanceGroup, cni bool) iamrole.OwnedRole {
	return iamrole.OwnedRole{
		Name: roleName(ig), Owner: ownerOf(ig), Legacy: legacyNames(ig), TrustPolicy: iamrole.NodeTrustPolicy,
		Description: "Nodes of InstanceGroup " + ownership.GroupTag(ig) + " (instance-manager)",
		Policies:    nodePolicies(ig, cni), InstanceProfile: true,
		Field: "spec.eks.configuration.roleName", Hint: "name it in roleName and instanceProfileName to use it",
		PoliciesField: "spec.eks.configuration.managedPolicies",
	}
}

// ensureRole returns the ARN of the nodes' role and the name of their
// instance profile: the ones named in the spec (which must exist; IAM
// GetRole, GetInstanceProfile), or a role and profile the group creates and
// owns (iamrole.EnsureOwnedRole; cni as for nodePolicies; what an earlier group of
// the same name left is adopted through a).
func ensureRole(ctx context.Context, api awsp.IAMAPI, a *ownership.Adopter, ig *v1alpha1.InstanceGroup, cni bool) (string, string, error) {
	c := ig.Spec.EKS.Configuration
	if !byoRole(ig) {
		r := nodeRole(ig, cni)
		r.Adopter = a
		r.Known = ig.Status.NodesInstanceRoleArn != "" && strings.HasSuffix(ig.Status.NodesInstanceRoleArn, "/"+r.Name)
		arn, err := iamrole.EnsureOwnedRole(ctx, api, r)
		return arn, r.Name, err
	}
	role, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(c.RoleName)})
	if iamrole.IsNoSuchEntity(err) {
		return "", "", &providers.SpecError{Field: "spec.eks.configuration.roleName", Detail: fmt.Sprintf("IAM role %q does not exist", c.RoleName)}
	}
	if err != nil {
		return "", "", fmt.Errorf("iam GetRole %s: %w", c.RoleName, err)
	}
	_, err = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(c.InstanceProfileName)})
	if iamrole.IsNoSuchEntity(err) {
		return "", "", &providers.SpecError{Field: "spec.eks.configuration.instanceProfileName", Detail: fmt.Sprintf("IAM instance profile %q does not exist", c.InstanceProfileName)}
	}
	if err != nil {
		return "", "", fmt.Errorf("iam GetInstanceProfile %s: %w", c.InstanceProfileName, err)
	}
	return awssdk.ToString(role.Role.Arn), c.InstanceProfileName, nil
}

// deleteRole removes the role and instance profile the group created,
// also when the spec has since switched to its own role (the created one
// would otherwise be left behind). A role brought by the spec is never
// touched: iamrole.DeleteOwnedRole only deletes a role whose ownership tags name
// this group.
func deleteRole(ctx context.Context, api awsp.IAMAPI, ig *v1alpha1.InstanceGroup) error {
	return iamrole.DeleteOwnedRole(ctx, api, nodeRole(ig, false)) // by name: the policies do not matter
}
