// Package iamrole is the IAM role an InstanceGroup creates and owns when
// its spec names none (the eks and eks-managed node role with its instance
// profile, the Fargate pod execution role): creation, policies, adoption,
// ownership-checked deletion, and the check of a role a spec names by ARN.
package iamrole

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// NodeTrustPolicy lets EC2 instances assume a role: the trust policy of
// every node role the controller creates (eks and eks-managed).
const NodeTrustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["ec2.amazonaws.com"]},"Action":["sts:AssumeRole"]}]}`

// AWS managed policies of worker node roles.
const (
	PolicyWorkerNode = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"
	PolicyCNI        = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
	PolicyECR        = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
	PolicySSM        = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
)

// CNIPolicy is what a node role the controller creates gets of
// AmazonEKS_CNI_Policy: nothing by default, because every process that
// reaches the node's credentials (IMDS) would get the VPC CNI's rights to
// move IP addresses and security groups of any ENI in the region; the
// VPC CNI takes its own role (IRSA or EKS Pod Identity for the aws-node
// service account). With keep (the --node-role-cni-policy flag, for
// clusters whose aws-node still uses the node role) it is PolicyCNI,
// unless the group's irsa-enabled annotation is "true".
func CNIPolicy(ig *v1alpha1.InstanceGroup, keep bool) []string {
	if !keep || ig.Annotations[v1alpha1.AnnotationIRSAEnabled] == "true" {
		return nil
	}
	return []string{PolicyCNI}
}

// OwnedRole is an IAM role an InstanceGroup creates and owns: it carries
// the ownership tags of Owner (package ownership), and only a role whose
// tags name Owner is changed or deleted.
type OwnedRole struct {
	// Name is the role name (IAM allows 64 characters).
	Name string
	// Owner is the InstanceGroup (and cluster) the role is created for.
	Owner ownership.Owner
	// Legacy accepts an instance profile without tags (earlier versions
	// did not tag them) when it holds no role but this one.
	Legacy bool
	// TrustPolicy is the assume-role policy document (JSON) and
	// Description the role's description; both are set at creation only.
	TrustPolicy string
	Description string
	// Policies are the managed policy ARNs the role carries; policies
	// attached that are not listed are detached.
	Policies []string
	// InstanceProfile gives the role an instance profile of the same name,
	// created and deleted with it (EC2 instances launched from a launch
	// template need one; managed node groups and Fargate do not).
	InstanceProfile bool
	// Field is the spec path that would name an existing role instead of
	// creating one; Hint says how. They make up the *providers.SpecError
	// returned when a role called Name exists without the owner tag.
	Field, Hint string
	// PoliciesField is the spec path the user adds policies with; when set,
	// a policy that does not exist is a *providers.SpecError on it.
	PoliciesField string
	// Adopter, when set, lets the role and profile an earlier InstanceGroup
	// of the same name left be adopted (see providers.Adopt).
	Adopter *ownership.Adopter `json:"-"`
	// Known: the group's status records the role as made, so a role found
	// missing was deleted by someone else; creating it again is then told
	// in a Warning Event (providers.ReasonRecreated): the new role has
	// another role id, and what trusted the old one (EKS access entries,
	// other accounts' policies) no longer applies.
	Known bool
}

// EnsureOwnedRole creates the role when missing (IAM GetRole, CreateRole
// with the owner tag), attaches r.Policies and detaches others
// (ListAttachedRolePolicies, AttachRolePolicy, DetachRolePolicy), and with
// r.InstanceProfile ensures the instance profile holding it
// (GetInstanceProfile, CreateInstanceProfile, AddRoleToInstanceProfile).
// It returns the role ARN. A role or profile of that name owned by someone
// else is an *ownership.ForeignError (its message names the owner found
// and r.Hint); failed calls are returned wrapped with the operation and
// role name. Ownership tags missing on a role of an earlier version are
// added (IAM TagRole). A role it has just created has no policies to list,
// and its instance profile is created without being looked up first (one
// that exists after all is then read).
func EnsureOwnedRole(ctx context.Context, api awsp.IAMAPI, r OwnedRole) (string, error) {
	var arn string
	created := false
	got, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(r.Name)})
	switch {
	case IsNoSuchEntity(err):
		created = true
		created, err := api.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName: awssdk.String(r.Name), AssumeRolePolicyDocument: awssdk.String(r.TrustPolicy),
			Description: awssdk.String(r.Description),
			Tags:        iamTags(r.Owner.Tags()),
		})
		if err != nil {
			return "", fmt.Errorf("iam CreateRole %s: %w", r.Name, err)
		}
		arn = awssdk.ToString(created.Role.Arn)
		if r.Known {
			providers.Emit(ctx, corev1.EventTypeWarning, providers.ReasonRecreated,
				"IAM role %s was deleted outside instance-manager and was created again: it has a new role id, so what trusted the old one (an EKS access entry) is replaced", r.Name)
		}
	case err != nil:
		return "", fmt.Errorf("iam GetRole %s: %w", r.Name, err)
	default:
		tags := TagMap(got.Role.Tags)
		retag := func(ctx context.Context, t map[string]string) error {
			_, err := api.TagRole(ctx, &iam.TagRoleInput{RoleName: awssdk.String(r.Name), Tags: iamTags(t)})
			return err
		}
		adopted, err := providers.Adopt(ctx, r.Adopter, r.Owner, "IAM role", r.Name, tags, retag)
		if err != nil {
			return "", fmt.Errorf("%w; %s: %s", err, r.Field, r.Hint)
		}
		if adopted {
			tags = maps.Clone(tags)
			maps.Copy(tags, r.Owner.Tags())
		}
		if missing := r.Owner.Missing(tags); len(missing) > 0 {
			if _, err := api.TagRole(ctx, &iam.TagRoleInput{RoleName: awssdk.String(r.Name), Tags: iamTags(missing)}); err != nil {
				return "", fmt.Errorf("iam TagRole %s: %w", r.Name, err)
			}
		}
		arn = awssdk.ToString(got.Role.Arn)
	}
	if err := syncPolicies(ctx, api, r, created); err != nil {
		return "", err
	}
	if r.InstanceProfile {
		if err := ensureInstanceProfile(ctx, api, r, created); err != nil {
			return "", err
		}
	}
	return arn, nil
}

func syncPolicies(ctx context.Context, api awsp.IAMAPI, r OwnedRole, created bool) error {
	attached := &iam.ListAttachedRolePoliciesOutput{} // a role just created has none
	if !created {
		var err error
		attached, err = api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(r.Name)})
		if err != nil {
			return fmt.Errorf("iam ListAttachedRolePolicies %s: %w", r.Name, err)
		}
	}
	want := map[string]bool{}
	for _, p := range r.Policies {
		want[p] = true
	}
	have := map[string]bool{}
	for _, p := range attached.AttachedPolicies {
		arn := awssdk.ToString(p.PolicyArn)
		have[arn] = true
		if !want[arn] {
			if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: awssdk.String(r.Name), PolicyArn: p.PolicyArn}); err != nil {
				return fmt.Errorf("iam DetachRolePolicy %s from %s: %w", arn, r.Name, err)
			}
		}
	}
	for _, p := range r.Policies {
		if have[p] {
			continue
		}
		if _, err := api.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: awssdk.String(r.Name), PolicyArn: awssdk.String(p)}); err != nil {
			if IsNoSuchEntity(err) && r.PoliciesField != "" {
				return &providers.SpecError{Field: r.PoliciesField, Detail: fmt.Sprintf("IAM policy %s does not exist", p)}
			}
			return fmt.Errorf("iam AttachRolePolicy %s to %s: %w", p, r.Name, err)
		}
	}
	return nil
}

// ensureInstanceProfile ensures the instance profile holding the role.
// With roleCreated (the role did not exist, so neither should the profile)
// it creates the profile without looking it up first.
func ensureInstanceProfile(ctx context.Context, api awsp.IAMAPI, r OwnedRole, roleCreated bool) error {
	name := r.Name
	var profile *iam.GetInstanceProfileOutput
	var lookupErr error = &iamtypes.NoSuchEntityException{}
	if !roleCreated {
		profile, lookupErr = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(name)})
	}
	if IsNoSuchEntity(lookupErr) {
		created, cerr := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String(name), Tags: iamTags(r.Owner.Tags())})
		var exists *iamtypes.EntityAlreadyExistsException
		switch {
		case errors.As(cerr, &exists):
			// There after all (a crash after it was made, or someone
			// else's): read it, and check whose it is below.
			profile, lookupErr = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(name)})
		case cerr != nil:
			return fmt.Errorf("iam CreateInstanceProfile %s: %w", name, cerr)
		default:
			profile, lookupErr = &iam.GetInstanceProfileOutput{InstanceProfile: created.InstanceProfile}, nil
		}
	}
	if err := lookupErr; err != nil {
		return fmt.Errorf("iam GetInstanceProfile %s: %w", name, err)
	}
	if err := profileOwned(ctx, api, r, profile.InstanceProfile); err != nil {
		return err
	}
	for _, role := range profile.InstanceProfile.Roles {
		if awssdk.ToString(role.RoleName) == name {
			return nil
		}
	}
	if _, err := api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: awssdk.String(name), RoleName: awssdk.String(name)}); err != nil {
		return fmt.Errorf("iam AddRoleToInstanceProfile %s: %w", name, err)
	}
	return nil
}

// profileOwned checks the instance profile's ownership tags (one an
// earlier group of the same name left is adopted with r.Adopter, IAM
// TagInstanceProfile); with r.Legacy, an untagged profile holding no
// other role passes too.
func profileOwned(ctx context.Context, api awsp.IAMAPI, r OwnedRole, p *iamtypes.InstanceProfile) error {
	tags := TagMap(p.Tags)
	retag := func(ctx context.Context, t map[string]string) error {
		_, err := api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: awssdk.String(r.Name), Tags: iamTags(t)})
		return err
	}
	_, err := providers.Adopt(ctx, r.Adopter, r.Owner, "IAM instance profile", r.Name, tags, retag)
	if err == nil || !r.Legacy || tags[ownership.TagInstanceGroup] != "" {
		return err
	}
	for _, role := range p.Roles {
		if awssdk.ToString(role.RoleName) != r.Name {
			return err
		}
	}
	return nil
}

// DeleteOwnedRole deletes the role r.Name when its tags name r.Owner
// (IAM GetRole): with r.InstanceProfile it first empties and deletes the
// instance profile of the same name when that is r.Owner's too
// (GetInstanceProfile, RemoveRoleFromInstanceProfile,
// DeleteInstanceProfile), then detaches every policy
// (ListAttachedRolePolicies, DetachRolePolicy) and deletes the role
// (DeleteRole). A missing role, or one without the owner tag, is left
// alone and is not an error. While the role is still in use (another
// instance profile, e.g. one EKS made for a node group being deleted) IAM
// answers DeleteConflict, returned wrapped so the caller retries.
func DeleteOwnedRole(ctx context.Context, api awsp.IAMAPI, r OwnedRole) error {
	_, err := DeleteOwnedRoleReport(ctx, api, r)
	return err
}

// DeleteOwnedRoleReport is DeleteOwnedRole, also reporting whether the
// role was r.Owner's and has been deleted (false: missing, or not
// r.Owner's, and left alone).
func DeleteOwnedRoleReport(ctx context.Context, api awsp.IAMAPI, r OwnedRole) (bool, error) {
	got, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(r.Name)})
	if IsNoSuchEntity(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("iam GetRole %s: %w", r.Name, err)
	}
	if r.Owner.Check("IAM role", r.Name, TagMap(got.Role.Tags)) != nil {
		return false, nil
	}
	if r.InstanceProfile {
		profile, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(r.Name)})
		switch {
		case IsNoSuchEntity(err):
		case err != nil:
			return false, fmt.Errorf("iam GetInstanceProfile %s: %w", r.Name, err)
		case profileOwned(ctx, api, r, profile.InstanceProfile) != nil:
			// Someone else's profile of that name: leave it, and the role
			// stays while it is in that profile (IAM DeleteConflict).
		default:
			if err := deleteProfile(ctx, api, r.Name); err != nil {
				return false, err
			}
		}
	}
	if err := deleteRoleOnly(ctx, api, r.Name); err != nil {
		return false, err
	}
	return true, nil
}

func deleteProfile(ctx context.Context, api awsp.IAMAPI, name string) error {
	if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
		InstanceProfileName: awssdk.String(name), RoleName: awssdk.String(name)}); err != nil && !IsNoSuchEntity(err) {
		return fmt.Errorf("iam RemoveRoleFromInstanceProfile %s: %w", name, err)
	}
	if _, err := api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: awssdk.String(name)}); err != nil && !IsNoSuchEntity(err) {
		return fmt.Errorf("iam DeleteInstanceProfile %s: %w", name, err)
	}
	return nil
}

// deleteRoleOnly detaches the role's policies and deletes it.
func deleteRoleOnly(ctx context.Context, api awsp.IAMAPI, name string) error {
	r := OwnedRole{Name: name}
	attached, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(r.Name)})
	if err != nil && !IsNoSuchEntity(err) {
		return fmt.Errorf("iam ListAttachedRolePolicies %s: %w", r.Name, err)
	}
	if attached != nil {
		for _, p := range attached.AttachedPolicies {
			if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: awssdk.String(r.Name), PolicyArn: p.PolicyArn}); err != nil && !IsNoSuchEntity(err) {
				return fmt.Errorf("iam DetachRolePolicy %s from %s: %w", awssdk.ToString(p.PolicyArn), r.Name, err)
			}
		}
	}
	if _, err := api.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: awssdk.String(r.Name)}); err != nil && !IsNoSuchEntity(err) {
		return fmt.Errorf("iam DeleteRole %s: %w", r.Name, err)
	}
	return nil
}

// CheckRoleARN checks that the role a spec names by ARN
// (arn:<partition>:iam::<account>:role/[<path>/]<name>) exists, with IAM
// GetRole on its name. A malformed ARN or a missing role is a
// *providers.SpecError on field; the account is not compared (EKS itself
// rejects a role of another account).
func CheckRoleARN(ctx context.Context, api awsp.IAMAPI, arn, field string) error {
	name := RoleNameFromARN(arn)
	if name == "" {
		return &providers.SpecError{Field: field, Detail: fmt.Sprintf("%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", arn)}
	}
	_, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
	if IsNoSuchEntity(err) {
		return &providers.SpecError{Field: field, Detail: fmt.Sprintf("IAM role %q (from %s) does not exist", name, arn)}
	}
	if err != nil {
		return fmt.Errorf("iam GetRole %s: %w", name, err)
	}
	return nil
}

// RoleNameFromARN returns the role name of an IAM role ARN (the last
// segment of its resource path), or "" when arn is not a role ARN.
func RoleNameFromARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || !strings.HasPrefix(parts[5], "role/") {
		return ""
	}
	res := parts[5]
	return res[strings.LastIndex(res, "/")+1:]
}

// TagMap returns IAM tags as a map of key to value.
func TagMap(tags []iamtypes.Tag) map[string]string {
	return ownership.TagMap(tags, func(t iamtypes.Tag) *string { return t.Key }, func(t iamtypes.Tag) *string { return t.Value })
}

func iamTags(m map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, iamtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}

// IsNoSuchEntity reports whether err is IAM's NoSuchEntity (the role,
// profile or policy does not exist).
func IsNoSuchEntity(err error) bool {
	var nse *iamtypes.NoSuchEntityException
	return err != nil && errors.As(err, &nse)
}
