package imagepins

import (
	"maps"

	"github.com/instancemgr/instance-manager/boundaries"
)

// Kinds of a change of the pins, for Events and the metric.
const (
	// changeValues: a pinned value changed (AWS published another AMI
	// under a parameter, a control plane was upgraded): the new revision
	// moves groups to other AMIs, in the rollout's waves.
	changeValues = "values"
	// changeAdded: a reference no revision pinned is pinned (a group
	// started using it); the groups already pinned keep their AMIs.
	changeAdded = "added"
	// changeCleared: no group uses a reference any more; the pins are
	// removed, which moves no group to another AMI.
	changeCleared = "cleared"
)

// decision is whether to write the fresh pins and why.
type decision struct {
	write bool
	kind  string
	// changes are the pins' differences (boundaries.DefaultsDiff's
	// "pins..." paths), for the Event.
	changes []boundaries.FieldChange
}

// decide compares the pins in force (old) with those resolved now
// (fresh). It writes when a value changed or a reference was added, and
// when nothing is needed any more; a reference that is only no longer
// used stays pinned until the next write (dropping it alone would make a
// revision that changes nothing).
func decide(old, fresh *boundaries.Pins) decision {
	changes := boundaries.DefaultsDiff(&boundaries.Config{Pins: old}, &boundaries.Config{Pins: fresh})
	var changed, added bool
	for _, c := range changes {
		changed = changed || c.Old != "" && c.New != ""
		added = added || c.Old == "" && c.New != ""
	}
	switch {
	case changed:
		return decision{write: true, kind: changeValues, changes: changes}
	case added:
		return decision{write: true, kind: changeAdded, changes: changes}
	case fresh.Empty() && !old.Empty():
		return decision{write: true, kind: changeCleared, changes: changes}
	}
	return decision{}
}

// carry returns fresh with the values of old for the clusters and
// parameters whose lookup failed (failed), so that a transient failure
// neither drops a pin nor counts as a change.
func carry(old, fresh *boundaries.Pins, failedClusters, failedParams []string) *boundaries.Pins {
	if old == nil {
		return fresh
	}
	out := &boundaries.Pins{ClusterVersions: maps.Clone(fresh.ClusterVersions), Images: maps.Clone(fresh.Images)}
	for _, c := range failedClusters {
		if v, ok := old.ClusterVersions[c]; ok {
			if out.ClusterVersions == nil {
				out.ClusterVersions = map[string]string{}
			}
			out.ClusterVersions[c] = v
		}
	}
	for _, p := range failedParams {
		if v, ok := old.Images[p]; ok {
			if out.Images == nil {
				out.Images = map[string]string{}
			}
			out.Images[p] = v
		}
	}
	return out
}
