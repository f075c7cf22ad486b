package boundaries

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// schemaKind is the JSON shape a Go type decodes from.
type schemaKind int

const (
	kindObject schemaKind = iota // a struct: a fixed set of fields
	kindMap                      // a map: free keys, one value type
	kindList                     // a slice
	kindScalar                   // string, bool or number
	kindCustom                   // a type with its own UnmarshalJSON (IntOrString, Time)
	kindAny                      // an interface: anything
)

// schemaNode describes one Go type of the API by its json tags.
type schemaNode struct {
	kind   schemaKind
	typ    reflect.Type
	fields map[string]*schemaNode // kindObject
	names  []string               // kindObject: field names, sorted
	elem   *schemaNode            // kindMap, kindList
}

var (
	schemaOnce sync.Once
	specSchema *schemaNode
)

// instanceGroupSpecSchema returns the schema of InstanceGroupSpec, derived
// once by reflection so that it always follows api/v1alpha1.
func instanceGroupSpecSchema() *schemaNode {
	schemaOnce.Do(func() {
		specSchema = buildSchema(reflect.TypeOf(v1alpha1.InstanceGroupSpec{}), map[reflect.Type]*schemaNode{})
	})
	return specSchema
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

func buildSchema(t reflect.Type, seen map[reflect.Type]*schemaNode) *schemaNode {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := seen[t]; ok {
		return n
	}
	n := &schemaNode{typ: t}
	seen[t] = n
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		n.kind = kindCustom
		return n
	}
	switch t.Kind() {
	case reflect.Struct:
		n.kind = kindObject
		n.fields = map[string]*schemaNode{}
		addStructFields(n, t, seen)
		n.names = slices.Sorted(maps.Keys(n.fields))
	case reflect.Map:
		n.kind = kindMap
		n.elem = buildSchema(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		n.kind = kindList
		n.elem = buildSchema(t.Elem(), seen)
	case reflect.Interface:
		n.kind = kindAny
	default:
		n.kind = kindScalar
	}
	return n
}

// addStructFields adds the JSON fields of struct t to n, flattening embedded
// structs without a json name as encoding/json does.
func addStructFields(n *schemaNode, t reflect.Type, seen map[reflect.Type]*schemaNode) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStructFields(n, ft, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		n.fields[name] = buildSchema(f.Type, seen)
	}
}

// describe names the shape of a schema node, for messages.
func (n *schemaNode) describe() string {
	switch n.kind {
	case kindObject:
		return "an object"
	case kindMap:
		return "a map"
	case kindList:
		return "a list"
	case kindCustom:
		return "a value of type " + n.typ.String()
	case kindAny:
		return "any value"
	}
	switch n.typ.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "an integer"
	}
}

// ValidatePath reports whether the dot path p names a field of the
// InstanceGroup schema: "spec" followed by one or more json field names of
// api/v1alpha1.InstanceGroupSpec and the structs below it (BOUNDARIES.md,
// "The boundary ConfigMap": a path that does not exist is a ConfigMap error).
// A path may end at any field, object or not, but cannot go into the keys of
// a map (labels) or the elements of a list (tags), which have no field
// names. Returns nil for a valid path; otherwise an error naming the path,
// the deepest valid prefix and the nearest valid children, e.g.
// `unknown path "spec.eks.configuration.imag": spec.eks.configuration has
// no field "imag" (valid: image, ...)`.
func ValidatePath(p string) error {
	if p == PathResolvedImage {
		return fmt.Errorf("path %q is written by instance-manager (the AMI id its boundaries revision pins for image latest or ssm://); name spec.eks.configuration.image", p)
	}
	segs := splitPath(p)
	if segs[0] != "spec" {
		return fmt.Errorf("unknown path %q: paths start at the object root with \"spec.\" (e.g. spec.eks.configuration.image)", p)
	}
	if len(segs) == 1 {
		return fmt.Errorf("unknown path %q: name a field below spec (valid: %s)", p, nearest("", instanceGroupSpecSchema().names))
	}
	n := instanceGroupSpecSchema()
	for i, s := range segs[1:] {
		at := strings.Join(segs[:i+1], ".")
		if s == "" {
			return fmt.Errorf("unknown path %q: empty field name after %s", p, at)
		}
		switch n.kind {
		case kindObject:
		case kindMap:
			return fmt.Errorf("unknown path %q: %s is a map; a path cannot name its keys, name %s itself", p, at, at)
		case kindList:
			return fmt.Errorf("unknown path %q: %s is a list; a path cannot go into its elements, name %s itself", p, at, at)
		default:
			return fmt.Errorf("unknown path %q: %s is %s and has no fields", p, at, n.describe())
		}
		next, ok := n.fields[s]
		if !ok {
			return fmt.Errorf("unknown path %q: %s has no field %q%s (valid: %s)", p, at, s, nonASCII(s), nearest(s, n.names))
		}
		n = next
	}
	return nil
}

// maxSuggestions caps the "valid:" lists of messages.
const maxSuggestions = 8

// nearest lists candidates closest to s first (edit distance, ignoring
// case; then alphabetically), at most maxSuggestions of them, so that the
// field the writer meant is at the front.
func nearest(s string, candidates []string) string {
	type scored struct {
		name string
		d    int
	}
	ls := strings.ToLower(s)
	all := make([]scored, len(candidates))
	for i, c := range candidates {
		all[i] = scored{c, editDistance(ls, strings.ToLower(c))}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].d != all[j].d {
			return all[i].d < all[j].d
		}
		return all[i].name < all[j].name
	})
	names := make([]string, 0, maxSuggestions+1)
	for i, c := range all {
		if i == maxSuggestions {
			names = append(names, "...")
			break
		}
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkValue walks the canonical value v against schema n and appends one
// problem per unknown field or wrong JSON type, each naming its path
// (fields as .name, map keys and list indexes in brackets). JSON null is
// accepted anywhere, as encoding/json decodes it to the zero value.
func checkValue(n *schemaNode, v any, path string, problems *[]string) {
	if v == nil {
		return
	}
	bad := func() {
		*problems = append(*problems, fmt.Sprintf("%s: expected %s, got %s", path, n.describe(), kindOf(v)))
	}
	switch n.kind {
	case kindAny:
	case kindObject:
		m, ok := v.(map[string]any)
		if !ok {
			bad()
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f, ok := n.fields[k]
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s: unknown field %q (valid: %s)", path, k, nearest(k, n.names)))
				continue
			}
			checkValue(f, m[k], path+"."+k, problems)
		}
	case kindMap:
		m, ok := v.(map[string]any)
		if !ok {
			bad()
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			checkValue(n.elem, m[k], fmt.Sprintf("%s[%s]", path, k), problems)
		}
	case kindList:
		l, ok := v.([]any)
		if !ok {
			bad()
			return
		}
		for i, e := range l {
			checkValue(n.elem, e, fmt.Sprintf("%s[%d]", path, i), problems)
		}
	case kindCustom:
		raw, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(raw, reflect.New(n.typ).Interface())
		}
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("%s: not %s: %v", path, n.describe(), err))
		}
	case kindScalar:
		checkScalar(n, v, path, problems)
	}
}

func checkScalar(n *schemaNode, v any, path string, problems *[]string) {
	ok := false
	switch n.typ.Kind() {
	case reflect.String:
		_, ok = v.(string)
	case reflect.Bool:
		_, ok = v.(bool)
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case int64, float64:
			ok = true
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if i, ok = v.(int64); ok && reflect.Zero(n.typ).OverflowInt(i) {
			*problems = append(*problems, fmt.Sprintf("%s: %d is out of range for %s", path, i, n.typ.Kind()))
			return
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var i int64
		if i, ok = v.(int64); ok && (i < 0 || reflect.Zero(n.typ).OverflowUint(uint64(i))) {
			*problems = append(*problems, fmt.Sprintf("%s: %d is out of range for %s", path, i, n.typ.Kind()))
			return
		}
	default:
		ok = true // no other scalar kinds occur in the API
	}
	if !ok {
		*problems = append(*problems, fmt.Sprintf("%s: expected %s, got %s", path, n.describe(), kindOf(v)))
	}
}

// nonASCII points out the first non-ASCII character of a field name, which
// may look like an ASCII letter (Cyrillic "а" in "lаbels"): "" when there
// is none.
func nonASCII(name string) string {
	for i, r := range name {
		if r > unicode.MaxASCII {
			return fmt.Sprintf(" (it contains the non-ASCII character %q, %U, at byte %d; field names are ASCII)", r, r, i)
		}
	}
	return ""
}
