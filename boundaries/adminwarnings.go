package boundaries

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// AdminWarnings returns what the ConfigMap webhook tells the admin about
// settings that are valid but give tenants more than they may seem to
// (security review 2026-11-26, section 3): each names the data key and
// path, what a tenant can do with it and what to write instead. A nil
// Config has none. The ConfigMap is admitted either way: these are
// choices only the admin can judge.
//
//   - a crdStrategy kind instance-manager has no facts for (KnownCRDKinds):
//     whether its controller runs tenant text or acts on what it names is
//     unchecked;
//   - a quotas.namespaces entry, which replaces perNamespace whole,
//     without bounds perNamespace sets;
//   - a rollout wave that selects groups by their labels only (tenants
//     can no longer change those labels, but groups that carried them
//     before the wave existed, as their tenants wrote them, join it);
//   - a conditional whose selector a tenant can satisfy by writing
//     annotations on its own group.
func (c *Config) AdminWarnings() []string {
	if c == nil {
		return nil
	}
	var out []string
	for i, k := range c.CRDKinds {
		if _, known := KnownCRDKinds[k.GroupKind()]; known {
			continue
		}
		out = append(out, fmt.Sprintf("data.%s.allowedKinds[%d]: instance-manager has not reviewed kind %s: it cannot tell whether the kind's controller runs tenant-written text "+
			"(scripts, pod templates) or acts on objects a tenant names, with its own rights; every tenant allowed to set spec.strategy gets that (docs/upgrades.md, \"The crd strategy: which kinds to allow\")",
			KeyCRDStrategy, i, k.GroupKind()))
	}
	out = append(out, c.Quotas.droppedBounds()...)
	if c.Rollout != nil {
		for i, w := range c.Rollout.Waves {
			if w.Selector != "" && len(w.Namespaces) == 0 {
				out = append(out, fmt.Sprintf("data.%s.waves[%d] (%s) selects InstanceGroups by their labels (selector %q): tenants may no longer add, change or remove the labels it selects on, "+
					"but groups that carried them before, as their tenants wrote them, join this wave (kubectl get instancegroups -A -l '%s' lists them); add namespaces: to the wave to choose its groups by namespace", KeyRollout, i, w.Name, w.Selector, w.Selector))
			}
		}
	}
	for i, cond := range c.Conditionals {
		if keys := c.tenantSatisfiable(cond); keys != nil {
			out = append(out, fmt.Sprintf("data.%s[%d].annotationSelector %q matches annotations tenants write on their own groups (%s): any tenant can add them and get this conditional's defaults; "+
				"grant nothing here you would not grant every tenant, or select on a behaviour annotation sharedAnnotations does not list", KeyConditionals, i, cond.AnnotationSelector, strings.Join(keys, ", ")))
		}
	}
	return out
}

// tenantSatisfiable returns the annotation keys of cond's selector when a
// tenant can satisfy it alone, i.e. when no requirement demands a value
// of an annotation only the admin may write (a behaviour annotation the
// ConfigMap does not share); nil when it cannot or the selector does not
// parse (Parse has refused it).
func (c *Config) tenantSatisfiable(cond Conditional) []string {
	sel := cond.Selector
	if sel == nil {
		var err error
		if sel, err = labels.Parse(cond.AnnotationSelector); err != nil {
			return nil
		}
	}
	reqs, _ := sel.Requirements()
	var keys []string
	for _, r := range reqs {
		adminOnly := slices.Contains(BehaviourAnnotations, r.Key()) && !slices.Contains(c.SharedAnnotations, r.Key())
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In, selection.Exists:
			if adminOnly {
				return nil // the tenant cannot write it
			}
		}
		keys = append(keys, r.Key())
	}
	return keys
}

// droppedBounds returns, for each quotas.namespaces entry, the bounds
// perNamespace sets and the entry leaves out: the entry replaces
// perNamespace whole (ForNamespace), so those are no bound for that
// namespace.
func (q *Quotas) droppedBounds() []string {
	if q == nil || q.PerNamespace == nil {
		return nil
	}
	set := func(qt *Quota) map[string]bool {
		return map[string]bool{
			"maxGroups": qt.MaxGroups != nil, "maxSize": qt.MaxSize != nil, "maxTotalVCPU": qt.MaxTotalVCPU != nil,
			"instanceTypes": qt.InstanceTypes != nil, "tenancies": qt.Tenancies != nil, "maxVolumeSize": qt.MaxVolumeSize != nil,
			"maxVolumeIops": qt.MaxVolumeIops != nil, "maxWarmPoolSize": qt.MaxWarmPoolSize != nil, "maxConcurrentUpgrades": qt.MaxConcurrentUpgrades != nil,
		}
	}
	per := set(q.PerNamespace)
	var out []string
	for _, ns := range slices.Sorted(maps.Keys(q.Namespaces)) {
		qt := q.Namespaces[ns]
		has := set(&qt)
		var dropped []string
		for _, b := range slices.Sorted(maps.Keys(per)) {
			if per[b] && !has[b] {
				dropped = append(dropped, b)
			}
		}
		if len(dropped) > 0 {
			out = append(out, fmt.Sprintf("quotas.namespaces.%s replaces quotas.perNamespace for namespace %s, which then has no %s; write them in quotas.namespaces.%s to keep them",
				ns, ns, strings.Join(dropped, ", "), ns))
		}
	}
	return out
}
