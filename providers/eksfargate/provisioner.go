// Package eksfargate is the eks-fargate provisioner: an InstanceGroup
// becomes an EKS Fargate profile (and, unless the spec names a pod
// execution role, an IAM role it creates and owns).
//
// A Fargate profile cannot be changed. Its name ends in a hash of the
// fields that shape it (pod execution role, subnets, selectors), so a
// changed spec names a new profile: Apply creates it, waits until it is
// ACTIVE, and only then deletes the group's older profiles (those tagged
// for the group), so the selected pods always have a profile. Tags are
// applied at creation only.
package eksfargate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	eksprov "github.com/instancemgr/instance-manager/providers/eks"
)

// Provisioner implements providers.Provisioner for provisioner
// "eks-fargate". It keeps no state between calls.
type Provisioner struct {
	aws *awsp.Clients
}

var _ providers.Provisioner = (*Provisioner)(nil)

// New returns the eks-fargate provisioner using the EKS, EC2 (subnet
// references) and IAM (pod execution role) clients.
func New(clients *awsp.Clients) *Provisioner { return &Provisioner{aws: clients} }

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKSFargate == nil {
		return &providers.SpecError{Field: specPath, Detail: "required by the eks-fargate provisioner"}
	}
	return nil
}

// Apply ensures the Fargate profile of the current spec exists (EKS
// CreateFargateProfile) and, once it is ACTIVE, deletes the group's other
// profiles (DeleteFargateProfile). It resolves subnets (EC2
// DescribeSubnets) and the pod execution role (IAM GetRole, or the owned
// role's calls, see eks.EnsureOwnedRole) and lists the cluster's profiles
// (ListFargateProfiles, DescribeFargateProfile). Errors: a
// *providers.SpecError for unknown subnets, a missing role or cluster, or
// a profile of the same name that another owner tagged; other failures
// are wrapped with the EKS operation and profile name.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	f := ig.Spec.EKSFargate
	subnets, err := eksprov.ResolveSubnets(ctx, p.aws.EC2, f.Subnets, specPath+".subnets")
	if err != nil {
		return nil, err
	}
	roleARN := f.PodExecutionRoleArn
	if roleARN != "" {
		err = eksprov.CheckRoleARN(ctx, p.aws.IAM, roleARN, specPath+".podExecutionRoleArn")
	} else {
		roleARN, err = eksprov.EnsureOwnedRole(ctx, p.aws.IAM, podRole(ig))
	}
	if err != nil {
		return nil, err
	}
	s := newShape(roleARN, subnets, f.Selectors)
	name := profileName(ig, s)
	owned, takenBy, err := ownedProfiles(ctx, p.aws.EKS, f.ClusterName, eksprov.OwnerOf(ig, f.ClusterName), name)
	if errors.Is(err, errNoCluster) {
		return nil, &providers.SpecError{Field: specPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", f.ClusterName)}
	}
	if err != nil {
		return nil, err
	}
	if takenBy != nil {
		return nil, taken(name, f.ClusterName, *takenBy, ig)
	}
	cur, old := split(owned, name)
	obs := &providers.Observation{GroupName: name, RoleARN: roleARN, Managed: true}
	if cur == nil {
		cur, err = p.create(ctx, ig, name, s, subnets)
		if err != nil {
			return nil, err
		}
		if cur == nil { // EKS is busy with another profile of the cluster
			obs.Updating = true
			obs.Message = fmt.Sprintf("waiting to create Fargate profile %s: EKS creates or deletes one profile of cluster %s at a time", name, f.ClusterName)
			return obs, nil
		}
	}

	var notes []string
	switch cur.Status {
	case ekstypes.FargateProfileStatusActive:
		obs.Active = true
		if len(old) > 0 {
			obs.Updating = true
			notes = append(notes, fmt.Sprintf("replacing Fargate profile(s) %s with %s", strings.Join(names(old), ", "), name))
			more, err := deleteProfiles(ctx, p.aws.EKS, f.ClusterName, old)
			if err != nil {
				return nil, err
			}
			notes = append(notes, more...)
		}
	case ekstypes.FargateProfileStatusCreating:
		obs.Updating = true
		notes = append(notes, fmt.Sprintf("Fargate profile %s is CREATING", name))
	case ekstypes.FargateProfileStatusDeleting:
		// Someone else is deleting it; it is created again once gone.
		obs.Updating = true
		notes = append(notes, fmt.Sprintf("Fargate profile %s is being DELETED outside instance-manager; it will be created again", name))
	default: // CREATE_FAILED, DELETE_FAILED or a state this version does not know
		notes = append(notes, fmt.Sprintf("Fargate profile %s is in unexpected state %s (%s); the previous profile(s) are kept", name, cur.Status, issues(cur)))
	}
	obs.Message = strings.Join(notes, "; ")
	return obs, nil
}

// create creates the profile (EKS CreateFargateProfile) and returns it;
// nil when EKS refuses because another profile of the cluster is being
// created or deleted (ResourceInUseException with no profile of that
// name). A profile of that name that appeared meanwhile is returned when
// it is ours and is a *providers.SpecError otherwise.
func (p *Provisioner) create(ctx context.Context, ig *v1alpha1.InstanceGroup, name string, s shape, subnets []string) (*ekstypes.FargateProfile, error) {
	f := ig.Spec.EKSFargate
	tags := map[string]string{}
	for k, v := range f.Tags {
		tags[k] = v
	}
	maps.Copy(tags, eksprov.OwnerOf(ig, f.ClusterName).Tags()) // last: a spec tag cannot replace them
	out, err := p.aws.EKS.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{
		ClusterName: awssdk.String(f.ClusterName), FargateProfileName: awssdk.String(name),
		PodExecutionRoleArn: awssdk.String(s.RoleARN), Subnets: s.Subnets, Selectors: s.selectors(), Tags: tags,
	})
	switch {
	case err == nil:
		return out.FargateProfile, nil
	case isNotFound(err):
		return nil, &providers.SpecError{Field: specPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", f.ClusterName)}
	case isInUse(err):
		got, derr := describe(ctx, p.aws.EKS, f.ClusterName, name)
		if derr != nil || got == nil {
			return nil, derr
		}
		if err := eksprov.OwnerOf(ig, f.ClusterName).Check("Fargate profile", name, got.Tags); err != nil {
			return nil, err
		}
		return got, nil
	}
	return nil, fmt.Errorf("eks CreateFargateProfile %s (cluster %s): %w", name, f.ClusterName, err)
}

// taken is the error for a profile of the group's name owned by another.
func taken(name, cluster, owner string, ig *v1alpha1.InstanceGroup) error {
	return &ownership.ForeignError{Kind: "Fargate profile", Name: name, Want: eksprov.OwnerOf(ig, cluster), Found: owner}
}

// split separates the profile named name from the others.
func split(profiles []ekstypes.FargateProfile, name string) (cur *ekstypes.FargateProfile, old []ekstypes.FargateProfile) {
	for i := range profiles {
		if awssdk.ToString(profiles[i].FargateProfileName) == name {
			cur = &profiles[i]
		} else {
			old = append(old, profiles[i])
		}
	}
	return cur, old
}

func names(profiles []ekstypes.FargateProfile) []string {
	out := make([]string, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, awssdk.ToString(p.FargateProfileName))
	}
	return out
}

// Delete deletes every Fargate profile tagged for the group (EKS
// ListFargateProfiles, DescribeFargateProfile, DeleteFargateProfile) and
// returns false until none is left (an error names a profile that failed
// to delete, which is tried again); then it deletes the pod execution role
// the group created, if any (see eks.DeleteOwnedRole), and returns true.
// A missing cluster has no profiles left.
func (p *Provisioner) Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	if configured(ig) != nil {
		return true, nil // nothing could have been created
	}
	cluster := ig.Spec.EKSFargate.ClusterName
	owned, _, err := ownedProfiles(ctx, p.aws.EKS, cluster, eksprov.OwnerOf(ig, cluster), "")
	if err != nil && !errors.Is(err, errNoCluster) {
		return false, err
	}
	if len(owned) > 0 {
		notes, err := deleteProfiles(ctx, p.aws.EKS, cluster, owned)
		if err != nil {
			return false, err
		}
		if len(notes) > 0 {
			return false, errors.New(strings.Join(notes, "; "))
		}
		return false, nil // gone once no longer listed
	}
	// The created role is deleted whatever podExecutionRoleArn says now:
	// the owner tag tells whether it is ours.
	if err := eksprov.DeleteOwnedRole(ctx, p.aws.IAM, podRole(ig)); err != nil {
		return false, err
	}
	return true, nil
}
