package webhooks

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

// QuotaProblems returns the quotas ig breaks beside others (the other
// InstanceGroups of the installation; ig itself among them is skipped):
// the namespace and cluster bounds in force under cfg
// (boundaries.Config.EffectiveQuotas: the ConfigMap's, or the defaults),
// which groups of an excluded namespace or of adminNamespace (the
// ConfigMap's) skip, then AWS's own limits, which every group counts
// against. adding is false for an update of an existing group: the counts
// (maxGroups, AWS's limits) do not change then, and are not checked. The
// validating webhook passes every other group; the
// reconciler, before it builds a group, only those created before it
// (CreatedBefore), so that of groups admitted together past a quota the
// later ones wait.
func QuotaProblems(cfg *boundaries.Config, ig *v1alpha1.InstanceGroup, others []v1alpha1.InstanceGroup, adminNamespace string, adding bool) []string {
	q := cfg.EffectiveQuotas()
	var out []string
	if !cfg.Excluded(ig.Namespace) && ig.Namespace != adminNamespace {
		if adding {
			out = append(out, q.Check(ig, others)...)
		} else {
			out = append(out, q.CheckUpdate(ig, others)...)
		}
	}
	if adding {
		out = append(out, q.CheckAWSLimits(ig, others)...)
	}
	return out
}

// CreatedBefore returns the groups of all created before ig: an earlier
// creationTimestamp, or the same second and an earlier namespace/name
// (the API server's timestamps have a resolution of one second). Every
// replica orders the groups the same way. A group not yet created (no
// timestamp) comes after all.
func CreatedBefore(ig *v1alpha1.InstanceGroup, all []v1alpha1.InstanceGroup) []v1alpha1.InstanceGroup {
	if ig.CreationTimestamp.IsZero() {
		return all
	}
	key := ig.Namespace + "/" + ig.Name
	var out []v1alpha1.InstanceGroup
	for i := range all {
		o := &all[i]
		if o.CreationTimestamp.IsZero() {
			continue
		}
		if o.CreationTimestamp.Before(&ig.CreationTimestamp) ||
			o.CreationTimestamp.Equal(&ig.CreationTimestamp) && o.Namespace+"/"+o.Name < key {
			out = append(out, *o)
		}
	}
	return out
}
