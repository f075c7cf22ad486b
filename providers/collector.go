package providers

import (
	"context"
	"fmt"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Collector is implemented by each provisioner (its Provisioner type:
// the method names do not clash with Provisioner's) for the garbage collector
// (reconciler/gc): it lists the cloud resources the provisioner created
// in a cluster, says whether a live InstanceGroup still builds one, and
// deletes an orphan in the provisioner's own order, draining first. The
// collector decides nothing about orphans: which owner is gone, the grace
// period, the deletion cap, metrics and Events are the GC's.
type Collector interface {
	// Owned lists the resources of this provisioner in the clusters named
	// (one listing per resource kind and cluster, or one per kind for the
	// region where the cloud filters by tag: those may name other
	// clusters, which the GC leaves alone; never one listing per group)
	// whose ownership tags (providers/aws/ownership) name this
	// installation, exactly one of those clusters and an InstanceGroup;
	// resources whose tags prove none of that are never returned. Errors
	// name the AWS operation and cluster.
	Owned(ctx context.Context, clusters []string) ([]Owned, error)
	// Builds returns why live, the InstanceGroup r.Owner names as it is
	// now (not being deleted), no longer builds r — another provisioner,
	// cluster or name, or re-created under another UID without adopting
	// r — or "" when it still builds or will adopt r (then r is never
	// deleted).
	Builds(live *v1alpha1.InstanceGroup, r Owned) string
	// DeleteOrphan deletes the orphan r after draining what runs on it, through
	// the Disruptions ctx carries (DisruptionsFrom: the controller's
	// drain runner; without one nothing is drained). It returns
	// Deleting when the deletion was asked and is under way or done,
	// Gone when r no longer exists; neither while the drain goes on (it is
	// called again at the next sweep). It checks r's ownership tags again
	// before each deletion call.
	DeleteOrphan(ctx context.Context, r Owned) (Deletion, error)
	// FinishOrphan deletes what o's resources of this provisioner leave that
	// cannot be listed by tag (IAM roles and instance profiles, checked by
	// their ownership tags), once none of them is listed any more; it
	// returns the kinds and names deleted, e.g. "iam-role <name>". Errors
	// are retried at the next sweep.
	FinishOrphan(ctx context.Context, o ownership.Owner) ([]string, error)
}

// Owned is one cloud resource a provisioner created, as its ownership
// tags prove.
type Owned struct {
	// Kind is the resource type, the "resource" label of the GC's
	// metrics: "auto-scaling-group", "launch-template", "nodegroup",
	// "fargate-profile".
	Kind string
	// Name is the resource's name; ID its id where deletion needs one
	// (launch templates), else "".
	Name, ID string
	// Owner is the InstanceGroup (and its UID, when tagged) and the one
	// cluster the tags name.
	Owner ownership.Owner
	// Tags are the resource's tags as listed.
	Tags map[string]string
	// Created is when the cloud created the resource; zero when unknown.
	Created time.Time
	// Dependent resources (launch templates) are used by the others of
	// their owner: they are deleted only once none of the owner's other
	// resources is listed.
	Dependent bool
	// Deleting is true when the cloud is deleting the resource already.
	Deleting bool
}

// Deletion is how far Collector.DeleteOrphan got.
type Deletion struct {
	// Deleting: the deletion was asked (or was under way already).
	Deleting bool
	// Gone: the resource no longer exists.
	Gone bool
	// Waiting says what the deletion waits for (a drain), when neither.
	Waiting string
}

// Claim is Collector.Builds for provisioners that adopt nothing
// (eks-managed, eks-fargate): live (r.Owner's InstanceGroup, not being
// deleted, with provisioner and cluster as its spec says now) builds r
// only when it uses provisioner, in r's cluster, and is the UID r's tags
// record (a group deleted and created again is another owner: what the
// earlier one left is swept, freeing the names).
func Claim(live *v1alpha1.InstanceGroup, r Owned, provisioner, cluster string) string {
	o := r.Owner
	switch {
	case live.Spec.Provisioner != provisioner:
		return fmt.Sprintf("InstanceGroup %s now uses provisioner %q", o, live.Spec.Provisioner)
	case cluster != o.Cluster:
		return fmt.Sprintf("InstanceGroup %s now builds in cluster %q", o, cluster)
	case o.UID != "" && live.UID != o.UID:
		return fmt.Sprintf("InstanceGroup %s was deleted and created again (uid %s, now %s)", o, o.UID, live.UID)
	}
	return ""
}

// InstanceDrains is implemented by the Disruptions the garbage collector
// passes to DeleteOrphan, for provisioners whose Nodes carry no label
// naming their group (eks: Auto Scaling groups).
type InstanceDrains interface {
	// DrainInstances cordons and drains, through the controller's drain
	// runner, the Nodes whose spec.providerID names one of the EC2
	// instance ids. Done when every such Node is drained (none counts as
	// done).
	DrainInstances(ctx context.Context, ids []string) (Retirement, error)
}
