package boundaries

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Where keikoproj instance-manager's API gives a spec field another shape
// or name than ours (docs/compatibility.md, "Compatibility with keikoproj
// instance-manager"), the CRD accepts both and NormalizeForms turns the
// original's into ours before the effective spec is computed, so the
// stored spec is the same as if the tenant had written ours. The
// submitted-spec annotation keeps what the tenant wrote; everything that
// recomputes from it (Submitted) normalises again.

// NormalizeForms rewrites, in a decoded spec (the object under "spec"),
// keikoproj instance-manager's forms into ours:
//   - eks-fargate.tags, a list of maps of strings, becomes the one map
//     merging them;
//   - eks.configuration.metadataOptions.httpPutHopLimit moves to
//     httpPutResponseHopLimit.
//
// A list item that is not an object, a tag key given twice with different
// values, or both hop limit names with different values is an error naming
// the field path; the spec is then left partly normalised and must be
// refused. Values of other shapes are left for validation to report.
func NormalizeForms(spec map[string]any) field.ErrorList {
	var errs field.ErrorList
	if f, ok := spec["eks-fargate"].(map[string]any); ok {
		errs = append(errs, mergeTagList(f, "tags", field.NewPath("spec", "eks-fargate", "tags"))...)
	}
	if eks, ok := spec["eks"].(map[string]any); ok {
		if c, ok := eks["configuration"].(map[string]any); ok {
			if m, ok := c["metadataOptions"].(map[string]any); ok {
				errs = append(errs, renameField(m, "httpPutHopLimit", "httpPutResponseHopLimit",
					field.NewPath("spec", "eks", "configuration", "metadataOptions"))...)
			}
		}
	}
	return errs
}

// mergeTagList replaces parent[key], when it is a list of objects, by one
// object holding all their entries (at is the path of parent[key]).
func mergeTagList(parent map[string]any, key string, at *field.Path) field.ErrorList {
	list, ok := parent[key].([]any)
	if !ok {
		return nil
	}
	var errs field.ErrorList
	merged := map[string]any{}
	from := map[string]int{} // tag key -> index of the item that set it
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(at.Index(i), item,
				"must be an object of tag keys and values (keikoproj instance-manager's list form), or write tags as one map"))
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := m[k]
			if prev, seen := from[k]; seen && !SameJSON(merged[k], v) {
				errs = append(errs, field.Invalid(at.Index(i).Key(k), v,
					fmt.Sprintf("tag %q is already set to %s by %s; a tag key may be given once", k, CompactJSON(merged[k]), at.Index(prev).Key(k))))
				continue
			}
			if _, seen := from[k]; !seen {
				from[k] = i
			}
			merged[k] = v
		}
	}
	parent[key] = merged
	return errs
}

// renameField moves parent[alias] to parent[name] (at is the path of
// parent); both present with different values is an error.
func renameField(parent map[string]any, alias, name string, at *field.Path) field.ErrorList {
	v, ok := parent[alias]
	if !ok {
		return nil
	}
	delete(parent, alias)
	if cur, set := parent[name]; set && !SameJSON(cur, v) {
		return field.ErrorList{field.Invalid(at.Child(alias), v,
			fmt.Sprintf("is keikoproj instance-manager's name of %s, which is set to %s: give the value once, as %s", at.Child(name), CompactJSON(cur), name))}
	}
	parent[name] = v
	return nil
}
