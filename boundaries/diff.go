package boundaries

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FieldChange is one field path whose default differs between two
// boundaries revisions: what a group not setting that field itself gets
// before and after the change.
type FieldChange struct {
	// Path is the dot path from the object root
	// ("spec.eks.configuration.image"); a map key holding a dot is written
	// in brackets ("...labels[node.kubernetes.io/role]"). A conditional's
	// default is prefixed with its selector:
	// "conditionals[team=a].spec.eks.configuration.image".
	Path string `json:"path"`
	// Old and New are the values: a string as is, anything else as
	// compact JSON, a list whole; "" when the path has no default on that
	// side (added or removed).
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

// String is "path: old -> new", with "(none)" for a missing side.
func (c FieldChange) String() string {
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	return fmt.Sprintf("%s: %s -> %s", c.Path, none(c.Old), none(c.New))
}

// DefaultsDiff is the field-by-field difference between the defaults of
// old and new (Config.Defaults, the values the revisions pin (Pins:
// "pins.images[<parameter>]", "pins.clusterVersions[<cluster>]"), then
// each Conditional's defaults keyed by its annotation selector), as flattened leaf paths sorted by path. Lists
// and scalars are leaves. A nil Config has no defaults. It says what the
// admin's defaults change; a group's own value on a shared path
// (merge-override, replace) may keep it from the new default.
func DefaultsDiff(old, new *Config) []FieldChange {
	before, after := map[string]string{}, map[string]string{}
	flattenDefaults(old, before)
	flattenDefaults(new, after)
	var out []FieldChange
	for _, p := range slices.Sorted(maps.Keys(before)) {
		if n, ok := after[p]; !ok || n != before[p] {
			out = append(out, FieldChange{Path: p, Old: before[p], New: n})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[p]; !ok {
			out = append(out, FieldChange{Path: p, New: after[p]})
		}
	}
	slices.SortFunc(out, func(a, b FieldChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func flattenDefaults(c *Config, into map[string]string) {
	if c == nil {
		return
	}
	flattenInto("", c.Defaults, into)
	flattenPins(c.Pins, into)
	for _, cond := range c.Conditionals {
		flattenInto("conditionals["+cond.AnnotationSelector+"]", cond.Defaults, into)
	}
}

// flattenInto adds v's leaves under prefix.
func flattenInto(prefix string, v any, into map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		if prefix != "" && v != nil {
			into[prefix] = leaf(v)
		}
		return
	}
	for k, sub := range m {
		p := k
		if strings.Contains(k, ".") {
			p = "[" + k + "]"
		}
		if prefix != "" && !strings.HasPrefix(p, "[") {
			p = "." + p
		}
		flattenInto(prefix+p, sub, into)
	}
}

func leaf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return CompactJSON(v)
}
