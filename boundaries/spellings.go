package boundaries

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// fold is the spelling-insensitive key of an enum value: lower case,
// without '-' and '_' (capacity-optimized, CapacityOptimized and
// CAPACITY_OPTIMIZED fold alike).
func fold(s string) string {
	return separators.Replace(strings.ToLower(s))
}

// separators drops '-' and '_' (a Replacer is built once and safe for
// concurrent use; building one per call was a quarter of the CPU time of
// an admission review).
var separators = strings.NewReplacer("-", "", "_", "")

// canonicalSpellings maps, for each of v1alpha1.EnumFields (same index),
// the folded spelling of every value to its canonical spelling.
var canonicalSpellings = func() []map[string]string {
	out := make([]map[string]string, len(v1alpha1.EnumFields))
	for i, f := range v1alpha1.EnumFields {
		out[i] = map[string]string{}
		for _, v := range f.Values {
			out[i][fold(v)] = v
		}
	}
	return out
}()

// NormalizeSpellings rewrites, in a decoded spec (the object under
// "spec"), every enumerated value (v1alpha1.EnumFields) spelled in another
// case or with other separators to its canonical spelling. Values that
// match no canonical spelling are left for validation to report
// (CheckSpellings).
func NormalizeSpellings(spec map[string]any) {
	for i, f := range v1alpha1.EnumFields {
		canonical := canonicalSpellings[i]
		visit(spec, strings.Split(f.Path, "."), field.NewPath("spec"), func(v string, _ *field.Path) string {
			if c, ok := canonical[fold(v)]; ok {
				return c
			}
			return v
		})
	}
}

// visit applies fn to every string at path under node (at field path at),
// replacing it with fn's result.
func visit(node any, path []string, at *field.Path, fn func(string, *field.Path) string) {
	m, ok := node.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	key, list := strings.CutSuffix(path[0], "[]")
	child, ok := m[key]
	if !ok {
		return
	}
	at = at.Child(key)
	last := len(path) == 1
	switch {
	case list:
		items, _ := child.([]any)
		for i, it := range items {
			if s, ok := it.(string); ok && last {
				items[i] = fn(s, at.Index(i))
			} else if !last {
				visit(it, path[1:], at.Index(i), fn)
			}
		}
	case last:
		if s, ok := child.(string); ok {
			m[key] = fn(s, at)
		}
	default:
		visit(child, path[1:], at, fn)
	}
}

// CheckSpellings reports the enumerated values (v1alpha1.EnumFields) of a
// decoded spec that are not canonical, as after NormalizeSpellings: values
// not allowed in any spelling, each a field.NotSupported with its field
// path and the allowed values.
func CheckSpellings(spec map[string]any) field.ErrorList {
	var errs field.ErrorList
	for _, f := range v1alpha1.EnumFields {
		visit(spec, strings.Split(f.Path, "."), field.NewPath("spec"), func(v string, at *field.Path) string {
			if v != "" && !slices.Contains(f.Values, v) {
				errs = append(errs, field.NotSupported(at, v, f.Values))
			}
			return v
		})
	}
	return errs
}
