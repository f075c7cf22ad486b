package eksfargate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// errNoCluster is returned by ownedProfiles when the cluster does not exist.
var errNoCluster = errors.New("EKS cluster does not exist")

// listNames returns the names of the cluster's Fargate profiles (EKS
// ListFargateProfiles, all pages, with the SDK paginator). A missing cluster is errNoCluster.
func listNames(ctx context.Context, api awsp.EKSAPI, cluster string) ([]string, error) {
	var names []string
	pages := eks.NewListFargateProfilesPaginator(api, &eks.ListFargateProfilesInput{ClusterName: awssdk.String(cluster)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if isNotFound(err) {
			return nil, errNoCluster
		}
		if err != nil {
			return nil, fmt.Errorf("eks ListFargateProfiles (cluster %s): %w", cluster, err)
		}
		names = append(names, out.FargateProfileNames...)
	}
	return names, nil
}

// ownedProfiles returns the profiles among names that candidate accepts
// (those that can be the group's, by their name) and are tagged as
// owner's (ownership.Owner.Check) or that a adopts (providers.Adopt: an
// earlier InstanceGroup of owner's name left it; retagged with EKS
// TagResource), sorted by name, and whether a profile
// named taken exists with another (or no) owner, described by
// ownership.Describe (EKS DescribeFargateProfile for each candidate only;
// a profile gone meanwhile is skipped). Failures are wrapped with the
// operation.
func ownedProfiles(ctx context.Context, api awsp.EKSAPI, a *ownership.Adopter, cluster string, names []string, candidate func(string) bool, owner ownership.Owner, taken string) (owned []ekstypes.FargateProfile, takenBy *string, err error) {
	for _, name := range names {
		if !candidate(name) {
			continue
		}
		p, err := describe(ctx, api, cluster, name)
		if err != nil {
			return nil, nil, err
		}
		if p == nil {
			continue
		}
		adopted, err := providers.Adopt(ctx, a, owner, "Fargate profile", name, p.Tags, retagProfile(api, p))
		switch {
		case err == nil:
			if adopted {
				p.Tags = maps.Clone(p.Tags)
				maps.Copy(p.Tags, owner.Tags())
			}
			owned = append(owned, *p)
		case !ownership.IsForeign(err):
			return nil, nil, err
		case name == taken:
			found := ownership.Describe(p.Tags)
			takenBy = &found
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		return awssdk.ToString(owned[i].FargateProfileName) < awssdk.ToString(owned[j].FargateProfileName)
	})
	return owned, takenBy, nil
}

// retagProfile writes tags on the profile (EKS TagResource).
func retagProfile(api awsp.EKSAPI, p *ekstypes.FargateProfile) providers.Retag {
	return func(ctx context.Context, tags map[string]string) error {
		if _, err := api.TagResource(ctx, &eks.TagResourceInput{ResourceArn: p.FargateProfileArn, Tags: tags}); err != nil {
			return fmt.Errorf("eks TagResource %s (Fargate profile %s): %w", awssdk.ToString(p.FargateProfileArn), awssdk.ToString(p.FargateProfileName), err)
		}
		return nil
	}
}

// describe returns the profile, or nil when it does not exist (EKS
// DescribeFargateProfile).
func describe(ctx context.Context, api awsp.EKSAPI, cluster, name string) (*ekstypes.FargateProfile, error) {
	out, err := api.DescribeFargateProfile(ctx, &eks.DescribeFargateProfileInput{ClusterName: awssdk.String(cluster), FargateProfileName: awssdk.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eks DescribeFargateProfile %s (cluster %s): %w", name, cluster, err)
	}
	return out.FargateProfile, nil
}

// deleteProfiles asks EKS to delete each profile not already DELETING
// (EKS DeleteFargateProfile). A profile already gone is fine; one EKS
// cannot delete now (ResourceInUseException: EKS deletes one profile of a
// cluster at a time) is tried again on the next call. It returns a note
// for each profile in an unexpected state (DELETE_FAILED, with its health
// issues).
func deleteProfiles(ctx context.Context, api awsp.EKSAPI, cluster string, profiles []ekstypes.FargateProfile) ([]string, error) {
	var notes []string
	for _, p := range profiles {
		name := awssdk.ToString(p.FargateProfileName)
		switch p.Status {
		case ekstypes.FargateProfileStatusDeleting:
			continue
		case ekstypes.FargateProfileStatusDeleteFailed:
			notes = append(notes, fmt.Sprintf("Fargate profile %s failed to delete (%s), deleting again", name, issues(&p)))
		}
		_, err := api.DeleteFargateProfile(ctx, &eks.DeleteFargateProfileInput{ClusterName: awssdk.String(cluster), FargateProfileName: awssdk.String(name)})
		if err != nil && !isNotFound(err) && !isInUse(err) {
			return notes, fmt.Errorf("eks DeleteFargateProfile %s (cluster %s): %w", name, cluster, err)
		}
	}
	return notes, nil
}

// issues joins a profile's health issues as "code: message".
func issues(p *ekstypes.FargateProfile) string {
	if p.Health == nil || len(p.Health.Issues) == 0 {
		return "no health issues reported"
	}
	var out []string
	for _, is := range p.Health.Issues {
		out = append(out, fmt.Sprintf("%s: %s", is.Code, awssdk.ToString(is.Message)))
	}
	return strings.Join(out, "; ")
}

func isNotFound(err error) bool {
	var nf *ekstypes.ResourceNotFoundException
	return err != nil && errors.As(err, &nf)
}

func isInUse(err error) bool {
	var iu *ekstypes.ResourceInUseException
	return err != nil && errors.As(err, &iu)
}
