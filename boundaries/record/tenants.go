package record

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deferral is a group its tenant keeps out of its wave
// (v1alpha1.RolloutDefer, where rollout.tenants.deferUpTo allows it): it
// keeps the revision it runs until the annotation goes or Until passes,
// then moves (Record.Late).
type Deferral struct {
	// Group is namespace/name.
	Group string `json:"group"`
	// Wave names the wave it was kept out of.
	Wave string `json:"wave"`
	// Until is the wave's start plus deferUpTo: it moves then at the
	// latest (inside a maintenance window).
	Until metav1.Time `json:"until"`
}

// IsDeferred reports whether group is kept out of its wave by its tenant.
func (r *Record) IsDeferred(group string) bool {
	return r != nil && slices.ContainsFunc(r.Deferred, func(d Deferral) bool { return d.Group == group })
}

// TenantMoved returns where group is when it moved at its tenant's time:
// TenantEarly, TenantLate, or "" when it did not. Such a group is to run
// the target, outside any wave.
func (r *Record) TenantMoved(group string) string {
	if r == nil {
		return ""
	}
	in := func(g Group) bool { return g.Group == group }
	switch {
	case slices.ContainsFunc(r.Early, in):
		return TenantEarly
	case slices.ContainsFunc(r.Late, in):
		return TenantLate
	}
	return ""
}

// Where a group that moved at its tenant's time is, in place of a wave's
// name (a wave's name cannot hold a colon).
const (
	TenantEarly = "tenant:early"
	TenantLate  = "tenant:late"
)

// firstGroups is the first MaxPlanned of groups, for the readable summary.
func firstGroups(groups []Group) []Group {
	return groups[:min(len(groups), MaxPlanned)]
}
