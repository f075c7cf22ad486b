package boundaries

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Enforcement is what happens to a tenant value on a restricted path that
// differs from the admin's (BOUNDARIES.md, "The boundary ConfigMap").
type Enforcement string

const (
	// EnforcementWarn replaces the tenant's value by the admin's and warns.
	EnforcementWarn Enforcement = "warn"
	// EnforcementDeny rejects the request.
	EnforcementDeny Enforcement = "deny"
)

// The keys of the boundary ConfigMap's data. The first three are those of
// the original keikoproj instance-manager; enforcement and rollout are ours.
const (
	KeyBoundaries   = "boundaries"
	KeyDefaults     = "defaults"
	KeyConditionals = "conditionals"
	KeyEnforcement  = "enforcement"
	KeyRollout      = "rollout"
	// Keys of issue 11 (tenant confinement), all ours.
	KeyExcludedNamespaces = "excludedNamespaces"
	KeySharedAnnotations  = "sharedAnnotations"
	KeyCRDStrategy        = "crdStrategy"
	KeyQuotas             = "quotas"
)

// dataKeys lists the allowed data keys, sorted, for messages.
var dataKeys = []string{KeyAllowlists, KeyBoundaries, KeyConditionals, KeyCRDStrategy, KeyDefaults, KeyDrains, KeyEnforcement, KeyExcludedNamespaces, KeyNodeIsolation, KeyQuotas, KeyRollout, KeySharedAnnotations}

// Config is a parsed boundary ConfigMap. Parse returns it validated; a
// hand-built Config is accepted by Effective and Hash as well.
type Config struct {
	// Restricted are admin-owned paths: a default, if there is one, always
	// wins. Dot paths from the object root, e.g. "spec.eks.configuration.image".
	Restricted []string
	// Merge are shared paths unioned with the defaults; the default wins a conflict.
	Merge []string
	// MergeOverride are shared paths unioned with the defaults; the tenant wins a conflict.
	MergeOverride []string
	// Replace are shared paths where a tenant value replaces the default whole.
	Replace []string
	// Defaults is the decoded `defaults`, rooted at the object:
	// {"spec": {...}}, in canonical JSON form; nil when there are none.
	Defaults map[string]any
	// Conditionals are extra defaults for InstanceGroups whose annotations
	// match, applied in order over Defaults.
	Conditionals []Conditional
	// Enforcement is EnforcementWarn (also when empty) or EnforcementDeny.
	Enforcement Enforcement
	// MaxConcurrentUpgrades is the cluster-wide cap on groups rotating
	// nodes at once because of a boundary change; 0 = not set.
	MaxConcurrentUpgrades int
	// Rollout is the progressive rollout of boundary changes (data key
	// rollout's waves, soak and failure; rollout.go); nil: a change
	// reaches every group at once.
	Rollout *RolloutPolicy
	// Maintenance is when changes may start (data key rollout's windows
	// and freezes; windows.go); nil: at any time.
	Maintenance *Maintenance
	// Sensitive are paths restricted unless a rule names them or an
	// ancestor; Parse sets SensitivePaths.
	Sensitive []string
	// ExcludedNamespaces are namespaces whose groups are admitted as
	// submitted (the admin's opt-out list, data key excludedNamespaces).
	ExcludedNamespaces []string
	// SharedAnnotations are the BehaviourAnnotations tenants may set
	// (data key sharedAnnotations).
	SharedAnnotations []string
	// CRDKinds are the kinds the crd upgrade strategy may create and the
	// fields tenants may set in them (data key crdStrategy.allowedKinds,
	// crdkinds.go); none (DefaultCRDKinds) when the key is absent.
	CRDKinds []CRDKind
	// Quotas are the bounds of data key quotas; nil when there are none.
	Quotas *Quotas
	// Allowlists is the parsed `allowlists` key (allowlist.go); nil when
	// absent, which gives every list its default.
	Allowlists *Allowlists
	// Pins are the values resolved from AWS that this revision pins
	// (pins.go; data key KeyPins of a revision, never of the ConfigMap);
	// nil when none.
	Pins *Pins
	// NodeIsolation gives every tenant group the isolation taint of its
	// namespace (data.nodeIsolation: perNamespace; see isolation.go).
	NodeIsolation bool
	// Drains are the admin's drain bounds (data key drains, drains.go);
	// nil: drains have no deadline. Not part of Hash: a new deadline
	// applies to the drains under way and rotates no node.
	Drains *DrainBounds
}

// Conditional is one entry of `conditionals`.
type Conditional struct {
	// AnnotationSelector is the selector as written in the ConfigMap.
	AnnotationSelector string
	// Selector is AnnotationSelector parsed; Effective parses
	// AnnotationSelector itself when it is nil.
	Selector labels.Selector
	// Defaults are rooted at the object like Config.Defaults: {"spec": {...}}.
	Defaults map[string]any
}

// ConfigError is returned by Parse: every problem found in the ConfigMap,
// each naming its data key and, where relevant, the path inside it and
// what would be valid.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return joinProblems("invalid boundary ConfigMap", e.Problems)
}

// Parse parses the data of the boundary ConfigMap strictly (BOUNDARIES.md,
// "The boundary ConfigMap" and "Bad input gets a clear error"). data holds
// the keys boundaries, defaults, conditionals, enforcement, rollout and
// allowlists (allowlist.go), each
// a YAML document; a missing, empty or blank value means the key is absent,
// and nil or empty data gives a Config with no rules (Enforcement warn).
// On any problem it returns nil and a *ConfigError listing all of them:
// unknown data keys, malformed YAML, unknown fields, unknown paths (see
// ValidatePath), a path listed twice or under two rules, defaults that do
// not decode strictly into a partial InstanceGroup with only a spec,
// invalid annotation selectors, an enforcement other than warn or deny, a
// rollout other than {maxConcurrentUpgrades: N} with N >= 1 and/or a valid
// progressive rollout policy (waves, soak, failure; rollout.go), and the
// tenancy keys of parse_tenancy.go (excludedNamespaces, sharedAnnotations,
// crdStrategy, quotas). The Config restricts SensitivePaths not named in
// a rule and allows the crd strategy no kind (DefaultCRDKinds) unless
// crdStrategy names some.
func Parse(data map[string]string) (*Config, error) {
	return parse(data, false)
}

// parse is Parse, and ParseRevision when revision is true (KeyPins is
// allowed and decoded into Config.Pins).
func parse(data map[string]string, revision bool) (*Config, error) {
	p := &parser{}
	c := &Config{Enforcement: EnforcementWarn, Sensitive: SensitivePaths, CRDKinds: DefaultCRDKinds}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		switch k {
		case KeyBoundaries, KeyDefaults, KeyConditionals, KeyEnforcement, KeyRollout,
			KeyExcludedNamespaces, KeySharedAnnotations, KeyCRDStrategy, KeyQuotas, KeyAllowlists, KeyNodeIsolation, KeyDrains:
		case KeyPins:
			if !revision {
				p.addf("data.%s: written by instance-manager (the AMI ids and cluster versions a boundaries revision pins, kept in the rollout record), never in the boundary ConfigMap; remove it", k)
			}
		default:
			p.addf("data.%s: unknown key (valid: %s)", k, strings.Join(dataKeys, ", "))
		}
	}
	if revision {
		pins, err := DecodePins(data[KeyPins])
		if err != nil {
			p.addf("%v", err)
		}
		c.Pins = pins
	}
	if v, ok := p.yaml(data, KeyBoundaries); ok {
		p.boundaries(c, v)
	}
	if v, ok := p.yaml(data, KeyDefaults); ok {
		c.Defaults = p.defaults(v, "data."+KeyDefaults)
	}
	if v, ok := p.yaml(data, KeyConditionals); ok {
		c.Conditionals = p.conditionals(v)
	}
	if v, ok := p.yaml(data, KeyEnforcement); ok {
		c.Enforcement = p.enforcement(v)
	}
	if v, ok := p.yaml(data, KeyRollout); ok {
		p.rollout(c, v)
	}
	p.tenancy(c, data)
	p.parseNodeIsolation(c, data)
	p.parseDrains(c, data)
	if v, ok := p.yaml(data, KeyAllowlists); ok {
		c.Allowlists = p.allowlists(v)
	}
	if len(p.problems) > 0 {
		return nil, &ConfigError{Problems: p.problems}
	}
	parsedHashes.add(c)
	return c, nil
}

// parser collects problems so that Parse reports all of them.
type parser struct {
	problems []string
}

func (p *parser) addf(format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}

// yaml decodes data[key] into canonical JSON form. ok is false when the key
// is absent, blank, or its YAML is malformed (then a problem is recorded).
func (p *parser) yaml(data map[string]string, key string) (any, bool) {
	s, ok := data[key]
	if !ok || strings.TrimSpace(s) == "" {
		return nil, false
	}
	if n := yamlDocuments(s); n > 1 {
		p.addf("data.%s: %d YAML documents (separated by ---); one is expected", key, n)
		return nil, false
	}
	raw, err := yaml.YAMLToJSONStrict([]byte(s))
	if err != nil {
		// One line: go-yaml lists several errors on lines of their own.
		msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")), " ")
		p.addf("data.%s: malformed YAML: %s", key, msg)
		return nil, false
	}
	var g any
	if err := decodeJSON(raw, &g); err != nil {
		p.addf("data.%s: malformed YAML: %v", key, err)
		return nil, false
	}
	v, err := normalize(g, "data."+key)
	if err != nil {
		p.addf("%v", err)
		return nil, false
	}
	return v, v != nil
}

// yamlDocuments counts the non-empty YAML documents in s: the converter
// reads only the first and would silently drop the rest. A malformed
// document ends the count; the converter reports it.
func yamlDocuments(s string) int {
	dec := yamlv2.NewDecoder(strings.NewReader(s))
	n := 0
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			return n
		}
		if v != nil {
			n++
		}
	}
}

// object requires v to be an object and reports its unknown fields.
func (p *parser) object(v any, at, want string, fields ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.addf("%s: expected %s, got %s", at, want, kindOf(v))
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		known := false
		for _, f := range fields {
			known = known || k == f
		}
		if !known {
			p.addf("%s: unknown field %q (valid: %s)", at, k, strings.Join(fields, ", "))
		}
	}
	return m, true
}

// rule names the lists of `boundaries`, in the order they are checked.
type ruleKind int

const (
	ruleRestricted ruleKind = iota
	ruleMerge
	ruleMergeOverride
	ruleReplace
)

func (r ruleKind) String() string {
	return [...]string{"restricted", "shared.merge", "shared.mergeOverride", "shared.replace"}[r]
}

// boundaries parses `boundaries`: {restricted: [paths], shared: {merge,
// mergeOverride, replace: [paths]}}.
func (p *parser) boundaries(c *Config, v any) {
	const at = "data." + KeyBoundaries
	root, ok := p.object(v, at, "an object with restricted and shared", "restricted", "shared")
	if !ok {
		return
	}
	lists := [4]any{ruleRestricted: root["restricted"]}
	if sv, present := root["shared"]; present {
		if shared, ok := p.object(sv, at+".shared", "an object with merge, mergeOverride and replace", "merge", "mergeOverride", "replace"); ok {
			lists[ruleMerge] = shared["merge"]
			lists[ruleMergeOverride] = shared["mergeOverride"]
			lists[ruleReplace] = shared["replace"]
		}
	}
	type seenAt struct {
		rule ruleKind
		idx  int
	}
	seen := map[string]seenAt{}
	var out [4][]string
	for rule, lv := range lists {
		rule := ruleKind(rule)
		if lv == nil {
			continue
		}
		listAt := at + "." + rule.String()
		l, ok := lv.([]any)
		if !ok {
			p.addf("%s: expected a list of paths, got %s", listAt, kindOf(lv))
			continue
		}
		for i, e := range l {
			elemAt := fmt.Sprintf("%s[%d]", listAt, i)
			path, ok := e.(string)
			if !ok {
				p.addf("%s: expected a path string, got %s", elemAt, kindOf(e))
				continue
			}
			if err := ValidatePath(path); err != nil {
				p.addf("%s: %v", elemAt, err)
				continue
			}
			if first, dup := seen[path]; dup {
				firstAt := fmt.Sprintf("%s[%d]", first.rule, first.idx)
				switch {
				case first.rule == rule:
					p.addf("%s: %q is listed twice (first at %s)", elemAt, path, firstAt)
				case first.rule == ruleRestricted:
					p.addf("%s: %q is both restricted (at %s) and shared; a path takes one rule", elemAt, path, firstAt)
				default:
					p.addf("%s: %q is in two shared lists (first at %s); a path takes one rule", elemAt, path, firstAt)
				}
				continue
			}
			seen[path] = seenAt{rule, i}
			out[rule] = append(out[rule], path)
		}
	}
	c.Restricted = out[ruleRestricted]
	c.Merge = out[ruleMerge]
	c.MergeOverride = out[ruleMergeOverride]
	c.Replace = out[ruleReplace]
}

// defaults parses a partial InstanceGroup with only a spec, strictly
// against the API types. It returns {"spec": {...}}, or nil for no values.
func (p *parser) defaults(v any, at string) map[string]any {
	root, ok := p.object(v, at, "a partial InstanceGroup starting at spec:", "spec")
	if !ok {
		return nil
	}
	spec, present := root["spec"]
	if !present {
		return nil
	}
	if _, problems := decodeSpecValue(spec, "spec"); len(problems) > 0 {
		for _, pr := range problems {
			p.addf("%s: %s", at, pr)
		}
		return nil
	}
	m, ok := spec.(map[string]any) // checked above: the spec schema is an object
	if !ok || len(m) == 0 {
		return nil
	}
	out := map[string]any{"spec": m}
	if _, set := getPath(out, splitPath(PathResolvedImage)); set {
		p.addf("%s: %s is written by instance-manager (the AMI id a boundaries revision pins for image latest or ssm://); set spec.eks.configuration.image instead", at, PathResolvedImage)
		return nil
	}
	return out
}

// conditionals parses a list of {annotationSelector, defaults}.
func (p *parser) conditionals(v any) []Conditional {
	const at = "data." + KeyConditionals
	l, ok := v.([]any)
	if !ok {
		p.addf("%s: expected a list of {annotationSelector, defaults}, got %s", at, kindOf(v))
		return nil
	}
	out := make([]Conditional, 0, len(l))
	for i, e := range l {
		elemAt := fmt.Sprintf("%s[%d]", at, i)
		m, ok := p.object(e, elemAt, "an object with annotationSelector and defaults", "annotationSelector", "defaults")
		if !ok {
			continue
		}
		var cond Conditional
		// A missing or empty selector matches every group, as an empty
		// Kubernetes label selector does.
		switch s := m["annotationSelector"].(type) {
		case nil:
			cond.Selector = labels.Everything()
		case string:
			sel, err := labels.Parse(s)
			if err != nil {
				p.addf("%s.annotationSelector: invalid selector %q: %v (Kubernetes label-selector syntax, e.g. 'instancemgr.keikoproj.io/os-family = windows')", elemAt, s, err)
			}
			cond.AnnotationSelector, cond.Selector = s, sel
		default:
			p.addf("%s.annotationSelector: expected a selector string, got %s", elemAt, kindOf(s))
		}
		if d, present := m["defaults"]; present {
			cond.Defaults = p.defaults(d, elemAt+".defaults")
		}
		out = append(out, cond)
	}
	return out
}

func (p *parser) enforcement(v any) Enforcement {
	switch s, _ := v.(string); Enforcement(s) {
	case EnforcementWarn, EnforcementDeny:
		return Enforcement(s)
	}
	if s, ok := v.(string); ok {
		p.addf("data.%s: %q is not an enforcement (valid: %s, %s)", KeyEnforcement, s, EnforcementWarn, EnforcementDeny)
	} else {
		p.addf("data.%s: expected %s or %s, got %s", KeyEnforcement, EnforcementWarn, EnforcementDeny, kindOf(v))
	}
	return EnforcementWarn
}
