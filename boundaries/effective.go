package boundaries

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Input is what Effective computes from, besides the Config.
type Input struct {
	// Spec is the tenant's submitted spec: the value of .spec (nil = empty).
	Spec map[string]any
	// Annotations are the InstanceGroup's annotations, matched by conditionals.
	Annotations map[string]string
	// NamespaceExcluded is true when the namespace is in the ConfigMap's
	// excludedNamespaces (Config.Excluded).
	NamespaceExcluded bool
	// AdminNamespace is true for the namespace of the boundary ConfigMap:
	// the admin's own groups get the ConfigMap's rules as written, without
	// what protects against tenants (sensitive paths, rules following the
	// provisioner), so that the seed manifests applied there by the admin
	// behave as they always did.
	AdminNamespace bool
	// Namespace is the group's namespace, for node isolation
	// (Config.NodeIsolation); required when that is on.
	Namespace string
}

// Result is the effective spec and what was enforced to get it.
type Result struct {
	// Spec is the effective spec (value of .spec), canonical JSON form, never
	// nil; it shares no memory with Input.Spec or Config.Defaults.
	Spec map[string]any
	// Overrides are the restricted paths where the tenant's value differed
	// from the default and was replaced, sorted by path.
	Overrides []Override
	// Hash is c.Hash(in.NamespaceExcluded), for the boundaries-hash annotation.
	Hash string
}

// Override is a tenant value on a restricted path replaced by the admin's
// (BOUNDARIES.md: the webhook warns or denies per Config.Enforcement).
// Values deeply equal to the default are not overrides, and neither is an
// empty object, which says nothing that is lost. Where other boundary paths
// lie below Path, their subtrees are left out of both values: those rules,
// not this one, decide them.
type Override struct {
	Path      string
	Submitted any
	// Enforced is the admin's value; nil when the path has no default and
	// the tenant's value was removed (see Removed).
	Enforced any
}

// Removed reports whether the path has no default: the tenant's value is
// dropped and the path left unset.
func (o Override) Removed() bool { return o.Enforced == nil }

// String renders the override for an admission warning or an Event, e.g.
// `spec.eks.configuration.image: "ami-0bad" replaced by "ami-1234" (restricted)`
// or `spec.eks.configuration.userData: [...] removed (restricted, no default)`.
func (o Override) String() string {
	if o.Removed() {
		return fmt.Sprintf("%s: %s removed (restricted, no default)", o.Path, CompactJSON(o.Submitted))
	}
	return fmt.Sprintf("%s: %s replaced by %s (restricted)", o.Path, CompactJSON(o.Submitted), CompactJSON(o.Enforced))
}

// rule is one boundary path with its kind, ready to apply.
type rule struct {
	path  string
	segs  []string // below spec
	kind  ruleKind
	inner [][]string // segs of the other rules strictly below this one, relative to it
	// section, for a rule derived for another provisioner, is the section
	// (below spec) the rule applies in only when the group has it, so that
	// a derived default never creates a section of its own.
	section string
	// defaultSegs is where D holds this rule's default (below spec):
	// segs, or for a derived rule the named path it follows; nil for
	// none.
	defaultSegs []string
}

// Names reports whether the ConfigMap names path in a rule (otherwise a
// restriction on it comes from SensitivePaths or from the rule of an
// equivalent path).
func (c *Config) Names(path string) bool {
	return c != nil && (slices.Contains(c.Restricted, path) || slices.Contains(c.Merge, path) ||
		slices.Contains(c.MergeOverride, path) || slices.Contains(c.Replace, path))
}

// rules lists the Config's paths outer before inner (by depth, then path),
// so that an inner rule governs its own subtree: the named rules, the
// rules they imply for the other provisioners' sections (see equivalents),
// and a restricted rule for every sensitive path no rule covers.
func (c *Config) rules() ([]rule, error) { return c.rulesFor(false) }

// rulesFor is rules; for an admin namespace, the named rules only.
func (c *Config) rulesFor(admin bool) ([]rule, error) {
	var out []rule
	named := map[string]ruleKind{}
	var order []string
	add := func(paths []string, k ruleKind) error {
		for _, p := range paths {
			segs := splitPath(p)
			if len(segs) < 2 || segs[0] != "spec" {
				return fmt.Errorf("boundary path %q (%s): paths start with \"spec.\"", p, k)
			}
			out = append(out, rule{path: p, segs: segs[1:], kind: k, defaultSegs: segs[1:]})
			named[p] = k
			order = append(order, p)
		}
		return nil
	}
	for _, l := range []struct {
		paths []string
		kind  ruleKind
	}{{c.Restricted, ruleRestricted}, {c.Merge, ruleMerge}, {c.MergeOverride, ruleMergeOverride}, {c.Replace, ruleReplace}} {
		if err := add(l.paths, l.kind); err != nil {
			return nil, err
		}
	}
	if admin {
		order = nil // no derived rules, and no sensitive paths below
	}
	for _, d := range deriveRules(named, order) {
		segs := splitPath(d.path)[1:]
		r := rule{path: d.path, segs: segs, kind: d.kind, section: segs[0]}
		if d.defaultFrom != "" {
			r.defaultSegs = splitPath(d.defaultFrom)[1:]
		}
		out = append(out, r)
	}
	covered := map[string]ruleKind{}
	for _, r := range out {
		covered[r.path] = r.kind
	}
	for _, p := range c.Sensitive {
		if !admin && !coveredBy(p, covered) {
			segs := splitPath(p)[1:]
			out = append(out, rule{path: p, segs: segs, kind: ruleRestricted, defaultSegs: segs})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].segs) != len(out[j].segs) {
			return len(out[i].segs) < len(out[j].segs)
		}
		return out[i].path < out[j].path
	})
	for i := range out {
		for j := range out {
			if i != j && len(out[j].segs) > len(out[i].segs) && strings.HasPrefix(out[j].path, out[i].path+".") {
				out[i].inner = append(out[i].inner, out[j].segs[len(out[i].segs):])
			}
		}
	}
	return out, nil
}

// Effective computes the effective spec of BOUNDARIES.md, "Computing the
// effective spec":
//
//  1. D = the defaults' spec, then every conditional whose selector matches
//     in.Annotations merged over it in list order (later wins at leaves,
//     lists atomic).
//  2. Fields named in no boundary: the tenant's value, D's where the tenant
//     has none (objects merged recursively, lists atomic).
//  3. Boundary paths, outer before inner: restricted (D's value if D has
//     one, recording an Override when the tenant's differs; else the path
//     is left unset, recording an Override with Removed when the tenant
//     set it), replace (the tenant's if present, else D's), merge and
//     mergeOverride (see mergeShared). The boundary paths are the named
//     ones, the rules they imply for the equivalent paths of the other
//     provisioners' sections (applied only in a section the group has,
//     with the named path's default where the value means the same), and
//     c.Sensitive paths no rule covers, which are restricted.
//  4. A group of eks-managed or eks-fargate keeps the managed strategy
//     when the tenant asked for it or for none (keepManagedStrategy).
//
// A path may reach below what exists: absent intermediates mean no value.
// JSON null counts as absent. A nil Config (no ConfigMap) and
// in.NamespaceExcluded both give effective = submitted. Neither in.Spec nor
// c is modified. The error names the path for input that cannot be merged:
// a submitted value whose JSON shape conflicts with the default's at a
// merge path, or a non-object where a restricted default must be placed
// inside it; and it reports values with no JSON form or a hand-built Config
// whose paths, defaults or selectors are malformed.
func (c *Config) Effective(in Input) (Result, error) {
	t, err := normalizeObject(in.Spec, "spec")
	if err != nil {
		return Result{}, err
	}
	res := Result{Hash: c.Hash(in.NamespaceExcluded)}
	if c == nil || in.NamespaceExcluded {
		res.Spec = t
		return res, nil
	}
	d, err := c.defaultsFor(in.Annotations)
	if err != nil {
		return Result{}, err
	}
	rules, err := c.rulesFor(in.AdminNamespace)
	if err != nil {
		return Result{}, err
	}
	out := overlay(d, t).(map[string]any)
	for _, r := range rules {
		if r.section != "" {
			if _, ok := out[r.section].(map[string]any); !ok {
				continue
			}
		}
		var dv any
		dok := false
		if r.defaultSegs != nil {
			dv, dok = getPath(d, r.defaultSegs)
		}
		tv, tok := getPath(t, r.segs)
		var v any
		vok := false
		switch r.kind {
		case ruleRestricted:
			if tok {
				if o, differs := r.override(tv, dv, dok); differs {
					res.Overrides = append(res.Overrides, o)
				}
			}
			if dok {
				v, vok = dv, true
			} else {
				// Restricted without a default: admin-only and unset.
				// Inner rules that follow put back what they share.
				deletePath(out, r.segs)
			}
		case ruleReplace:
			switch {
			case tok:
				v, vok = tv, true
			case dok:
				v, vok = dv, true
			}
		case ruleMerge, ruleMergeOverride:
			switch {
			case dok && tok:
				v, err = mergeShared(dv, tv, r.segs[len(r.segs)-1], r.kind == ruleMergeOverride, r.path)
				if err != nil {
					return Result{}, err
				}
				vok = true
			case dok:
				v, vok = dv, true
			case tok:
				v, vok = tv, true
			}
		}
		if !vok {
			// Neither side has a value here, so neither has any value an
			// outer rule placed: nothing to remove.
			continue
		}
		// Copy: d and t are read again by the rules that follow, and inner
		// rules write into what is set here.
		if err := setPath(out, r.segs, deepCopy(v), "spec"); err != nil {
			return Result{}, fmt.Errorf("%w (boundary %s)", err, r.kind)
		}
	}
	keepManagedStrategy(out, t, &res)
	if c.NodeIsolation && !in.AdminNamespace {
		if in.Namespace == "" {
			return Result{}, isolationError()
		}
		isolate(out, in.Namespace)
	}
	c.pin(out, in.Annotations)
	sort.Slice(res.Overrides, func(i, j int) bool { return res.Overrides[i].Path < res.Overrides[j].Path })
	res.Spec = out
	return res, nil
}

// override compares the tenant's and the default's values of a restricted
// path (dok false: there is no default, the value is removed), leaving out
// the subtrees of the boundary paths below it. It reports a difference only
// where the tenant said something that is not kept.
func (r rule) override(tv, dv any, dok bool) (Override, bool) {
	if len(r.inner) > 0 {
		tv = mask(tv, r.inner)
		if dok {
			dv = mask(dv, r.inner)
		}
	}
	// An empty object says nothing that could be lost (the usual case: the
	// tenant's object holds only fields that inner rules govern).
	if m, ok := tv.(map[string]any); ok && len(m) == 0 {
		return Override{}, false
	}
	if dok && equalValues(tv, dv) {
		return Override{}, false
	}
	o := Override{Path: r.path, Submitted: deepCopy(tv)}
	if dok {
		o.Enforced = deepCopy(dv)
	}
	return o, true
}

// mask returns a copy of v without the values at the given relative paths.
func mask(v any, paths [][]string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	cp := deepCopy(m).(map[string]any)
	for _, p := range paths {
		deletePath(cp, p)
	}
	return cp
}

// defaultsFor computes D: the defaults' spec with every matching
// conditional merged over it, as a fresh canonical copy.
func (c *Config) defaultsFor(annotations map[string]string) (map[string]any, error) {
	d, err := normalizeObject(c.Defaults["spec"], "defaults.spec")
	if err != nil {
		return nil, err
	}
	set := labels.Set(annotations)
	for i, cond := range c.Conditionals {
		sel := cond.Selector
		if sel == nil {
			if sel, err = labels.Parse(cond.AnnotationSelector); err != nil {
				return nil, fmt.Errorf("conditionals[%d].annotationSelector: %v", i, err)
			}
		}
		if !sel.Matches(set) {
			continue
		}
		cd, err := normalizeObject(cond.Defaults["spec"], fmt.Sprintf("conditionals[%d].defaults.spec", i))
		if err != nil {
			return nil, err
		}
		d = overlay(d, cd).(map[string]any)
	}
	return d, nil
}
