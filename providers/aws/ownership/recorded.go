package ownership

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Recorded returns the owner tags prove for a resource of this
// installation: TagInstallation equal to Installation() (never empty),
// exactly one TagClusterPrefix+<cluster> tag, and TagInstanceGroup of
// the form "<namespace>/<name>" (TagUID, when present, is the UID). ok
// is false when any of that is missing: such a resource is not this
// installation's to collect.
func Recorded(tags map[string]string) (o Owner, ok bool) {
	if id := Installation(); id == "" || tags[TagInstallation] != id {
		return Owner{}, false
	}
	cluster := ""
	for k := range tags {
		if name, found := strings.CutPrefix(k, TagClusterPrefix); found {
			if cluster != "" {
				return Owner{}, false // several clusters: not one of ours
			}
			cluster = name
		}
	}
	ns, name, found := strings.Cut(tags[TagInstanceGroup], "/")
	if cluster == "" || !found || ns == "" || name == "" {
		return Owner{}, false
	}
	return Owner{Cluster: cluster, Namespace: ns, Name: name, UID: types.UID(tags[TagUID])}, true
}
