package providers

import (
	"context"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// OwnedByCluster is the listing of a provisioner's per-cluster resources
// (EKS ListNodegroups/DescribeNodegroup, ListFargateProfiles
// /DescribeFargateProfile) for Collector.Owned. For each cluster it takes
// the names names gives (found false: the cluster does not exist, so it
// has none), describes each (nil: gone meanwhile) and keeps, as Owned of
// kind, those whose tags prove them this installation's for that cluster
// (ownership.Recorded). view fills Tags, Created and Deleting from the
// description. Errors are names' and describe's, unchanged.
func OwnedByCluster[T any](ctx context.Context, clusters []string, kind string,
	names func(ctx context.Context, cluster string) (names []string, found bool, err error),
	describe func(ctx context.Context, cluster, name string) (*T, error),
	view func(*T) Owned) ([]Owned, error) {
	var out []Owned
	for _, cluster := range clusters {
		list, found, err := names(ctx, cluster)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		for _, name := range list {
			d, err := describe(ctx, cluster, name)
			if err != nil {
				return nil, err
			}
			if d == nil {
				continue
			}
			o := view(d)
			owner, ok := ownership.Recorded(o.Tags)
			if !ok || owner.Cluster != cluster {
				continue
			}
			o.Kind, o.Name, o.Owner = kind, name, owner
			out = append(out, o)
		}
	}
	return out, nil
}
