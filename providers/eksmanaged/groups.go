package eksmanaged

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// errNoCluster is returned by listNames when the cluster does not exist.
var errNoCluster = errors.New("EKS cluster does not exist")

// listNames returns the names of the cluster's managed node groups (EKS
// ListNodegroups, all pages, with the SDK paginator). A missing cluster is errNoCluster.
func listNames(ctx context.Context, api awsp.EKSAPI, cluster string) ([]string, error) {
	var names []string
	pages := eks.NewListNodegroupsPaginator(api, &eks.ListNodegroupsInput{ClusterName: awssdk.String(cluster)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if isNotFound(err) {
			return nil, errNoCluster
		}
		if err != nil {
			return nil, fmt.Errorf("eks ListNodegroups (cluster %s): %w", cluster, err)
		}
		names = append(names, out.Nodegroups...)
	}
	return names, nil
}

// owned is what a listing found of a group's node groups.
type owned struct {
	// groups are the node groups tagged for the group, sorted by name.
	groups []*ekstypes.Nodegroup
	// foreign maps the names that look like the group's but are tagged for
	// another owner (or none) to their tags.
	foreign map[string]map[string]string
}

// ownedNodegroups describes (EKS DescribeNodegroup) each of names that
// candidate accepts and keeps those owner's tags mark as its own, or that
// a adopts (providers.Adopt: an earlier InstanceGroup of owner's name
// left it; retagged with EKS TagResource); a node group gone meanwhile is
// skipped. Failures are wrapped with the operation.
func ownedNodegroups(ctx context.Context, api awsp.EKSAPI, a *ownership.Adopter, cluster string, names []string, candidate func(string) bool, owner ownership.Owner) (owned, error) {
	out := owned{foreign: map[string]map[string]string{}}
	for _, name := range names {
		if !candidate(name) {
			continue
		}
		ng, err := describe(ctx, api, cluster, name)
		if err != nil {
			return owned{}, err
		}
		if ng == nil {
			continue
		}
		retag := func(ctx context.Context, tags map[string]string) error {
			if _, err := api.TagResource(ctx, &eks.TagResourceInput{ResourceArn: ng.NodegroupArn, Tags: tags}); err != nil {
				return fmt.Errorf("eks TagResource %s (node group %s): %w", awssdk.ToString(ng.NodegroupArn), name, err)
			}
			return nil
		}
		adopted, err := providers.Adopt(ctx, a, owner, "EKS node group", name, ng.Tags, retag)
		if ownership.IsForeign(err) {
			out.foreign[name] = ng.Tags
			continue
		}
		if err != nil {
			return owned{}, err
		}
		if adopted {
			ng.Tags = maps.Clone(ng.Tags)
			maps.Copy(ng.Tags, owner.Tags())
		}
		out.groups = append(out.groups, ng)
	}
	sort.Slice(out.groups, func(i, j int) bool {
		return awssdk.ToString(out.groups[i].NodegroupName) < awssdk.ToString(out.groups[j].NodegroupName)
	})
	return out, nil
}

// deleteNodegroups asks EKS to delete each node group not already
// DELETING (EKS DeleteNodegroup: EKS tries to drain the nodes and
// force-terminates those not drained within 5 minutes, so callers drain
// them first). One already gone, or
// that EKS cannot delete now (ResourceInUseException: an update in
// progress), is left for the next call. It returns a note for each node
// group whose earlier deletion failed (DELETE_FAILED, with its health
// issues).
func deleteNodegroups(ctx context.Context, api awsp.EKSAPI, cluster string, groups []*ekstypes.Nodegroup) ([]string, error) {
	var notes []string
	for _, ng := range groups {
		name := awssdk.ToString(ng.NodegroupName)
		switch ng.Status {
		case ekstypes.NodegroupStatusDeleting:
			continue
		case ekstypes.NodegroupStatusDeleteFailed:
			notes = append(notes, fmt.Sprintf("EKS node group %s failed to delete (%s), deleting again", name, issues(ng)))
		}
		_, err := api.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name)})
		if err != nil && !isNotFound(err) && !isInUse(err) {
			return notes, fmt.Errorf("eks DeleteNodegroup %s (cluster %s): %w", name, cluster, err)
		}
	}
	return notes, nil
}

// issues joins a node group's health issues as "code: message".
func issues(ng *ekstypes.Nodegroup) string {
	if ng.Health == nil || len(ng.Health.Issues) == 0 {
		return "no health issues reported"
	}
	out := ""
	for i, is := range ng.Health.Issues {
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%s: %s", is.Code, awssdk.ToString(is.Message))
	}
	return out
}

func groupNames(groups []*ekstypes.Nodegroup) []string {
	var out []string
	for _, ng := range groups {
		out = append(out, awssdk.ToString(ng.NodegroupName))
	}
	return out
}
