package ownership

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Adoptable returns the UID that tags record when the only thing keeping
// the resource from being o's (Check) is that UID: its TagInstanceGroup is
// o, it names exactly one cluster, o's (TagClusterPrefix+o.Cluster =
// "owned"), and this installation (TagInstallation, which must be known
// and set on the resource). ok is false for anything else, including a
// resource Check already accepts: resources of other clusters or
// installations, or without the installation tag, are never adoptable.
func (o Owner) Adoptable(tags map[string]string) (types.UID, bool) {
	uid := tags[TagUID]
	if o.UID == "" || uid == "" || uid == string(o.UID) || tags[TagInstanceGroup] != o.String() {
		return "", false
	}
	if id := Installation(); id == "" || tags[TagInstallation] != id {
		return "", false
	}
	clusters := 0
	for k, v := range tags {
		if strings.HasPrefix(k, TagClusterPrefix) {
			clusters++
			if k != awsp.ClusterTagKey(o.Cluster) || v != "owned" {
				return "", false
			}
		}
	}
	if clusters != 1 {
		return "", false
	}
	return types.UID(uid), true
}

// Adopter lets an InstanceGroup deleted without its finalizer running and
// created again under the same name (a new UID) take back the resources
// its earlier self left: they carry its namespace/name, cluster and
// installation but the old UID, so Check refuses them.
type Adopter struct {
	// Reader reads InstanceGroups from the API server itself (a manager's
	// APIReader, not its cache: a cache may not have seen a group yet).
	// nil: nothing is ever adopted.
	Reader client.Reader
}

// Check is o.Check, except that a resource o.Adoptable accepts is o's to
// adopt when the UID it records belongs to no InstanceGroup that exists
// (one List of InstanceGroups from the API server) while o's UID does, not
// being deleted. It returns that previous UID ("" when the resource is
// o's already); the caller retags the resource with o.Tags() and says so
// (an Event). Otherwise it returns Check's *ForeignError, or the List's
// error wrapped.
func (a *Adopter) Check(ctx context.Context, o Owner, kind, name string, tags map[string]string) (types.UID, error) {
	err := o.Check(kind, name, tags)
	if err == nil {
		return "", nil
	}
	prev, ok := o.Adoptable(tags)
	if !ok || a == nil || a.Reader == nil {
		return "", err
	}
	igs := &v1alpha1.InstanceGroupList{}
	if lerr := a.Reader.List(ctx, igs); lerr != nil {
		return "", fmt.Errorf("%s %q records InstanceGroup %s's earlier uid %s; listing InstanceGroups to see whether it still exists: %w", kind, name, o, prev, lerr)
	}
	adopter := false
	for i := range igs.Items {
		ig := &igs.Items[i]
		switch ig.UID {
		case prev:
			// Its recorded owner exists (even being deleted: its
			// finalizer deletes what it owns): never taken from it.
			return "", err
		case o.UID:
			adopter = ig.DeletionTimestamp == nil
		}
	}
	if !adopter {
		return "", err
	}
	return prev, nil
}
