package eks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

const nodeTrustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["ec2.amazonaws.com"]},"Action":["sts:AssumeRole"]}]}`

// Worker node policies attached to every role the controller creates.
const (
	policyWorkerNode = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"
	policyCNI        = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
	policyECR        = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
	policySSM        = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
)

// nodePolicies are the policy ARNs a created role carries: the worker
// policies (AmazonEKS_CNI_Policy left off with irsa-enabled) plus
// spec.eks.configuration.managedPolicies (names or ARNs).
func nodePolicies(ig *v1alpha1.InstanceGroup) []string {
	out := []string{policyWorkerNode, policyECR, policySSM}
	if ig.Annotations[v1alpha1.AnnotationIRSAEnabled] != "true" {
		out = append(out, policyCNI)
	}
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

// ensureRole returns the ARN of the nodes' role and the name of their
// instance profile: the ones named in the spec (which must exist), or a role
// and profile the group creates and owns (IAM CreateRole, AttachRolePolicy,
// DetachRolePolicy, CreateInstanceProfile, AddRoleToInstanceProfile).
func ensureRole(ctx context.Context, api awsp.IAMAPI, ig *v1alpha1.InstanceGroup) (string, string, error) {
	c := ig.Spec.EKS.Configuration
	if byoRole(ig) {
		role, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(c.RoleName)})
		if isNoSuchEntity(err) {
			return "", "", &providers.SpecError{Field: "spec.eks.configuration.roleName", Detail: fmt.Sprintf("IAM role %q does not exist", c.RoleName)}
		}
		if err != nil {
			return "", "", fmt.Errorf("iam GetRole %s: %w", c.RoleName, err)
		}
		_, err = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(c.InstanceProfileName)})
		if isNoSuchEntity(err) {
			return "", "", &providers.SpecError{Field: "spec.eks.configuration.instanceProfileName", Detail: fmt.Sprintf("IAM instance profile %q does not exist", c.InstanceProfileName)}
		}
		if err != nil {
			return "", "", fmt.Errorf("iam GetInstanceProfile %s: %w", c.InstanceProfileName, err)
		}
		return awssdk.ToString(role.Role.Arn), c.InstanceProfileName, nil
	}

	name := roleName(ig)
	var arn string
	got, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
	switch {
	case isNoSuchEntity(err):
		created, err := api.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName: awssdk.String(name), AssumeRolePolicyDocument: awssdk.String(nodeTrustPolicy),
			Description: awssdk.String("Nodes of InstanceGroup " + owner(ig) + " (instance-manager)"),
			Tags:        []iamtypes.Tag{{Key: awssdk.String(TagInstanceGroup), Value: awssdk.String(owner(ig))}},
		})
		if err != nil {
			return "", "", fmt.Errorf("iam CreateRole %s: %w", name, err)
		}
		arn = awssdk.ToString(created.Role.Arn)
	case err != nil:
		return "", "", fmt.Errorf("iam GetRole %s: %w", name, err)
	default:
		if !ownedRole(got.Role.Tags, ig) {
			return "", "", &providers.SpecError{Field: "spec.eks.configuration.roleName",
				Detail: fmt.Sprintf("IAM role %q exists and was not created for this InstanceGroup; name it in roleName and instanceProfileName to use it", name)}
		}
		arn = awssdk.ToString(got.Role.Arn)
	}

	attached, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(name)})
	if err != nil {
		return "", "", fmt.Errorf("iam ListAttachedRolePolicies %s: %w", name, err)
	}
	want := map[string]bool{}
	for _, p := range nodePolicies(ig) {
		want[p] = true
	}
	have := map[string]bool{}
	for _, p := range attached.AttachedPolicies {
		arn := awssdk.ToString(p.PolicyArn)
		have[arn] = true
		if !want[arn] {
			if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: awssdk.String(name), PolicyArn: p.PolicyArn}); err != nil {
				return "", "", fmt.Errorf("iam DetachRolePolicy %s from %s: %w", arn, name, err)
			}
		}
	}
	for _, p := range nodePolicies(ig) {
		if have[p] {
			continue
		}
		if _, err := api.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: awssdk.String(name), PolicyArn: awssdk.String(p)}); err != nil {
			if isNoSuchEntity(err) {
				return "", "", &providers.SpecError{Field: "spec.eks.configuration.managedPolicies", Detail: fmt.Sprintf("IAM policy %s does not exist", p)}
			}
			return "", "", fmt.Errorf("iam AttachRolePolicy %s to %s: %w", p, name, err)
		}
	}

	profile, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(name)})
	if isNoSuchEntity(err) {
		created, cerr := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String(name)})
		if cerr != nil {
			return "", "", fmt.Errorf("iam CreateInstanceProfile %s: %w", name, cerr)
		}
		profile, err = &iam.GetInstanceProfileOutput{InstanceProfile: created.InstanceProfile}, nil
	}
	if err != nil {
		return "", "", fmt.Errorf("iam GetInstanceProfile %s: %w", name, err)
	}
	for _, r := range profile.InstanceProfile.Roles {
		if awssdk.ToString(r.RoleName) == name {
			return arn, name, nil
		}
	}
	if _, err := api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: awssdk.String(name), RoleName: awssdk.String(name)}); err != nil {
		return "", "", fmt.Errorf("iam AddRoleToInstanceProfile %s: %w", name, err)
	}
	return arn, name, nil
}

// deleteRole removes the role and instance profile the group created;
// a role brought by the spec, or not tagged for this group, is left alone.
func deleteRole(ctx context.Context, api awsp.IAMAPI, ig *v1alpha1.InstanceGroup) error {
	if byoRole(ig) {
		return nil
	}
	name := roleName(ig)
	got, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
	if isNoSuchEntity(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("iam GetRole %s: %w", name, err)
	}
	if !ownedRole(got.Role.Tags, ig) {
		return nil
	}
	if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
		InstanceProfileName: awssdk.String(name), RoleName: awssdk.String(name)}); err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("iam RemoveRoleFromInstanceProfile %s: %w", name, err)
	}
	if _, err := api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: awssdk.String(name)}); err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("iam DeleteInstanceProfile %s: %w", name, err)
	}
	attached, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(name)})
	if err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("iam ListAttachedRolePolicies %s: %w", name, err)
	}
	if attached != nil {
		for _, p := range attached.AttachedPolicies {
			if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: awssdk.String(name), PolicyArn: p.PolicyArn}); err != nil && !isNoSuchEntity(err) {
				return fmt.Errorf("iam DetachRolePolicy %s: %w", awssdk.ToString(p.PolicyArn), err)
			}
		}
	}
	if _, err := api.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: awssdk.String(name)}); err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("iam DeleteRole %s: %w", name, err)
	}
	return nil
}

func ownedRole(tags []iamtypes.Tag, ig *v1alpha1.InstanceGroup) bool {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == TagInstanceGroup {
			return awssdk.ToString(t.Value) == owner(ig)
		}
	}
	return false
}

func isNoSuchEntity(err error) bool {
	var nse *iamtypes.NoSuchEntityException
	return err != nil && errors.As(err, &nse)
}
