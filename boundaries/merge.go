package boundaries

import (
	"fmt"
	"maps"
	"slices"
)

// identityKeys are the fields that identify an element of a list of
// objects under merge and mergeOverride, by the name of the field holding
// the list (BOUNDARIES.md, "Computing the effective spec"; instanceTypes
// and selectors are ours). The name, not the full path, decides, so a
// shared path naming an object (spec.eks.configuration) merges the lists
// inside it the same way.
var identityKeys = map[string][]string{
	"tags":           {"key"},
	"volumes":        {"name"},
	"lifecycleHooks": {"name"},
	"userData":       {"name"},
	"taints":         {"key", "effect"},
	"instanceTypes":  {"type"},
	"selectors":      {"namespace"},
}

// overlay returns a new value: top over base, objects merged recursively
// with top winning at leaves, lists atomic. It is the rule for fields named
// in no boundary (tenant over defaults) and for conditionals (a matching
// conditional over the defaults). Either may be nil (absent).
func overlay(base, top any) any {
	bm, bok := base.(map[string]any)
	tm, tok := top.(map[string]any)
	if bok && tok {
		out := make(map[string]any, len(bm)+len(tm))
		for k, v := range bm {
			if _, both := tm[k]; !both {
				out[k] = deepCopy(v)
			}
		}
		for k, v := range tm {
			out[k] = overlay(bm[k], v)
		}
		return out
	}
	if top != nil {
		return deepCopy(top)
	}
	return deepCopy(base)
}

// mergeShared merges the default d and the tenant's t (both present,
// canonical) under merge (tenantWins false) or mergeOverride (tenantWins
// true): objects are unioned by key recursively; lists are unioned, by
// identity key where the field has one (see identityKeys); scalars, and
// list elements of the same identity, are a conflict that the default wins
// under merge and the tenant under mergeOverride. field is the name of the
// field holding the values and path their full path, for errors: values of
// different JSON shapes (an object and a list, a list and a scalar) cannot
// be merged.
func mergeShared(d, t any, field string, tenantWins bool, path string) (any, error) {
	switch dv := d.(type) {
	case map[string]any:
		tv, ok := t.(map[string]any)
		if !ok {
			return nil, shapeConflict(d, t, path)
		}
		out := make(map[string]any, len(dv)+len(tv))
		for k, v := range dv {
			out[k] = deepCopy(v)
		}
		for _, k := range slices.Sorted(maps.Keys(tv)) { // sorted: the first error is deterministic
			v := tv[k]
			if dvk, both := dv[k]; both {
				m, err := mergeShared(dvk, v, k, tenantWins, path+"."+k)
				if err != nil {
					return nil, err
				}
				out[k] = m
				continue
			}
			out[k] = deepCopy(v)
		}
		return out, nil
	case []any:
		tv, ok := t.([]any)
		if !ok {
			return nil, shapeConflict(d, t, path)
		}
		return mergeLists(dv, tv, identityKeys[field], tenantWins), nil
	default:
		switch t.(type) {
		case map[string]any, []any:
			return nil, shapeConflict(d, t, path)
		}
		if tenantWins {
			return t, nil
		}
		return d, nil
	}
}

func shapeConflict(d, t any, path string) error {
	return fmt.Errorf("%s: cannot merge the submitted value (%s) with the default (%s); give %s", path, kindOf(t), kindOf(d), kindOf(d))
}

// mergeLists unions two lists: the default's elements first in their
// order, then the tenant's new ones in theirs, each element once. With
// keys, objects carrying all of them are the same element when their key
// values are equal; other elements are the same when deeply equal. An
// element present on both sides is the default's, or under tenantWins the
// tenant's first one, kept at the default's position.
func mergeLists(d, t []any, keys []string, tenantWins bool) []any {
	out := make([]any, 0, len(d)+len(t))
	pos := make(map[string]int, len(d)+len(t))
	fromDefault := 0
	replaced := map[int]bool{}
	add := func(e any, isDefault bool) {
		id := elementIdentity(e, keys)
		if at, dup := pos[id]; dup {
			if !isDefault && tenantWins && at < fromDefault && !replaced[at] {
				out[at] = deepCopy(e)
				replaced[at] = true
			}
			return
		}
		pos[id] = len(out)
		out = append(out, deepCopy(e))
	}
	for _, e := range d {
		add(e, true)
	}
	fromDefault = len(out)
	for _, e := range t {
		add(e, false)
	}
	return out
}

// elementIdentity is the identity of a list element: its key values when it
// is an object holding all keys, otherwise the whole element. Canonical
// values render to JSON deterministically (sorted keys), so equal values
// have equal identities.
func elementIdentity(e any, keys []string) string {
	if m, ok := e.(map[string]any); ok && len(keys) > 0 {
		vals := make([]any, len(keys))
		all := true
		for i, k := range keys {
			v, ok := m[k]
			all = all && ok && v != nil
			vals[i] = v
		}
		if all {
			return "k" + CompactJSON(vals)
		}
	}
	if s, ok := e.(string); ok {
		return "s" + s // the common list of strings, without a JSON round trip
	}
	return "v" + CompactJSON(e)
}
