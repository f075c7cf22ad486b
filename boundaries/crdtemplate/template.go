// Package crdtemplate parses, checks and renders the crd upgrade
// strategy's template (spec.strategy.crd.spec). Tenants write it, so the
// language is bounded by construction: plain YAML whose string values may
// hold a fixed set of ${...} placeholders (PlaceholderList), substituted
// into the parsed values (never keys, never re-parsed, so no escaping is
// involved), with no branching, loops or functions. What the object may
// be is decided on the template alone, before any value is known, so the
// validating webhook and the reconciler decide alike whatever the group's
// status: the kind must be one the boundary ConfigMap allows
// (crdStrategy.allowedKinds), the namespace the group's, every field one
// the admin lets tenants set (tenantFields), no field the kind's controller
// executes, and a field naming a cloud resource only the group's own
// (boundaries.KnownCRDKinds).
package crdtemplate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

// Bounds of one template.
const (
	// MaxSource is the most bytes a template may have.
	MaxSource = 32 << 10
	// MaxOutput is the most bytes of keys and string values a rendering
	// may produce.
	MaxOutput = 64 << 10
)

// Field is the template's field path, which every error names.
const Field = "spec.strategy.crd.spec"

// errTooLarge is returned past MaxOutput.
var errTooLarge = fmt.Errorf("the rendered manifest is larger than %d bytes", MaxOutput)

// metadataFields are the metadata keys a template may hold; the strategy
// sets ownerReferences and its labels itself.
var metadataFields = []string{"name", "generateName", "namespace", "labels", "annotations"}

// Template is a parsed template that passed Prepare's checks.
type Template struct {
	obj     map[string]any
	gvk     schema.GroupVersionKind
	targets map[string]string
}

// GroupVersionKind is the kind the template creates.
func (t *Template) GroupVersionKind() schema.GroupVersionKind { return t.gvk }

// Prepare parses ig's template and checks it against cfg (nil allows no
// kind). Errors start with Field and say what would be valid: a Go
// template (with the new syntax), a template above MaxSource, YAML that
// does not parse strictly, a placeholder in a key or an unknown one, a
// missing apiVersion or kind, a kind cfg does not allow, another
// namespace, metadata other than metadataFields, and every field that is
// executed, names another resource or is not in the kind's tenantFields.
func Prepare(ig *v1alpha1.InstanceGroup, cfg *boundaries.Config) (*Template, error) {
	src := ""
	if ig.Spec.Strategy.CRD != nil {
		src = ig.Spec.Strategy.CRD.Spec
	}
	t, err := parse(src)
	if err == nil {
		err = t.check(ig, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Field, err)
	}
	return t, nil
}

// Admit is the validating webhook's check: Prepare, then Render with the
// group's metadata and every status placeholder at its longest, so that
// what it admits the reconciler renders within the same bounds.
func Admit(ig *v1alpha1.InstanceGroup, cfg *boundaries.Config) (*Template, error) {
	t, err := Prepare(ig, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := t.Render(admissionValues(ig)); err != nil {
		return nil, err
	}
	return t, nil
}

// goTemplate is the message for a template written in the former Go
// template syntax.
func goTemplate(src string) error {
	line := strings.Count(src[:strings.Index(src, "{{")], "\n") + 1
	return fmt.Errorf("Go templates are no longer accepted (\"{{\" on line %d): write the manifest as plain YAML with placeholders in values, "+
		"e.g. `asgName: ${.status.activeScalingGroupName}` for `asgName: {{ .InstanceGroup.Status.ActiveScalingGroupName }}` "+
		"and `${.metadata.name}` for `{{ .InstanceGroup.Name }}` (placeholders: %s; no conditions, loops or functions)", line, PlaceholderList())
}

func parse(src string) (*Template, error) {
	if len(src) > MaxSource {
		return nil, fmt.Errorf("the template has %d bytes, above %d", len(src), MaxSource)
	}
	if strings.Contains(src, "{{") {
		return nil, goTemplate(src)
	}
	obj := map[string]any{}
	if err := yaml.UnmarshalStrict([]byte(src), &obj); err != nil {
		return nil, fmt.Errorf("not a YAML object: %w", err)
	}
	if err := keysAndPlaceholders(obj, ""); err != nil {
		return nil, err
	}
	api, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if api == "" || kind == "" || strings.Contains(api+kind, "${") {
		return nil, errors.New("the manifest needs apiVersion and kind, written out (no placeholders)")
	}
	gv, err := schema.ParseGroupVersion(api)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", api, err)
	}
	return &Template{obj: obj, gvk: gv.WithKind(kind)}, nil
}

// keysAndPlaceholders refuses placeholders in keys and unknown or unclosed
// placeholders in values.
func keysAndPlaceholders(v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		// In key order, so that the first problem reported is always the same.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e := v[k]
			if strings.Contains(k, "${") {
				return fmt.Errorf("key %q at %s: placeholders are substituted into values only, never keys", k, orRoot(at))
			}
			if err := keysAndPlaceholders(e, join(at, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := keysAndPlaceholders(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case string:
		if err := scan(v, func(string) {}, func(placeholder) {}); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
	}
	return nil
}

// check decides on the template alone (see the package comment).
func (t *Template) check(ig *v1alpha1.InstanceGroup, cfg *boundaries.Config) error {
	gk := boundaries.GroupKind{Group: t.gvk.Group, Kind: t.gvk.Kind}
	rule, allowed := cfg.CRDKind(gk.Group, gk.Kind)
	var probs []string
	if !allowed {
		probs = append(probs, fmt.Sprintf("kind %s is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: %s)", gk, cfg.CRDKindList()))
	}
	if md, present := t.obj["metadata"]; present {
		m, isMap := md.(map[string]any)
		if !isMap {
			return errors.New("metadata must be an object")
		}
		for k := range m {
			if !slices.Contains(metadataFields, k) {
				probs = append(probs, fmt.Sprintf("metadata.%s may not be set (allowed metadata: %s)", k, strings.Join(metadataFields, ", ")))
			}
		}
		if ns, present := m["namespace"]; present && ns != ig.Namespace && ns != "${.metadata.namespace}" {
			probs = append(probs, fmt.Sprintf("metadata.namespace %q is not the group's namespace %q; the crd strategy creates objects in the group's own namespace only, "+
				"not in the namespace the template names as keikoproj instance-manager did (leave it out, or set %q or ${.metadata.namespace})",
				fmt.Sprint(ns), ig.Namespace, ig.Namespace))
		}
	}
	facts := boundaries.KnownCRDKinds[gk]
	for k, v := range t.obj {
		if k == "apiVersion" || k == "kind" || k == "metadata" || !allowed {
			continue
		}
		probs = append(probs, fields(v, k, rule, facts, gk)...)
	}
	if len(probs) > 0 {
		// The kind first, then the fields in order.
		sort.SliceStable(probs, func(i, j int) bool {
			return !strings.HasPrefix(probs[j], "kind ") && (strings.HasPrefix(probs[i], "kind ") || probs[i] < probs[j])
		})
		return errors.New(strings.Join(probs, "; "))
	}
	t.targets = facts.Targets
	return nil
}

// fields lists the problems of the value v at path at: a field the kind's
// controller executes, a target that is not its placeholder, a field not
// under tenantFields.
func fields(v any, at string, rule boundaries.CRDKind, facts boundaries.CRDKindFacts, gk boundaries.GroupKind) []string {
	_, isMap := v.(map[string]any)
	for _, e := range facts.Executed {
		// At or below an executed field, or a non-object above one.
		if boundaries.Covers(e, at) || !isMap && boundaries.Covers(at, e) {
			return []string{fmt.Sprintf("%s may not be set: the %s controller runs %s as a command in its own pod, with its own credentials", at, gk, e)}
		}
	}
	if want, ok := facts.Targets[at]; ok {
		if v != want {
			return []string{fmt.Sprintf("%s must be %s (the group's own resource) or left out for the controller to fill; got %q", at, want, fmt.Sprint(v))}
		}
		return nil
	}
	if m, ok := v.(map[string]any); ok && (len(m) == 0 || below(at, rule, facts)) {
		var probs []string
		for k, e := range m {
			probs = append(probs, fields(e, at+"."+k, rule, facts, gk)...)
		}
		return probs
	}
	if slices.ContainsFunc(rule.TenantFields, func(f string) bool { return boundaries.Covers(f, at) }) {
		return nil
	}
	allowed := "none"
	if len(rule.TenantFields) > 0 {
		allowed = strings.Join(rule.TenantFields, ", ")
	}
	return []string{fmt.Sprintf("%s is not a field the boundary ConfigMap lets tenants set in %s (crdStrategy.allowedKinds tenantFields: %s; always allowed: apiVersion, kind, metadata.%s)",
		at, gk, allowed, strings.Join(metadataFields, ", metadata."))}
}

// below reports whether a path of interest (a tenant field, an executed
// field or a target) lies strictly below at, so a map there is judged
// field by field rather than as a whole.
func below(at string, rule boundaries.CRDKind, facts boundaries.CRDKindFacts) bool {
	in := func(p string) bool { return p != at && boundaries.Covers(at, p) }
	if slices.ContainsFunc(rule.TenantFields, in) || slices.ContainsFunc(facts.Executed, in) {
		return true
	}
	for p := range facts.Targets {
		if in(p) {
			return true
		}
	}
	return false
}

// Render substitutes v into the template and returns the object: the
// targets the template leaves out set to their values, and generateName
// "<group>-" when it has no name. Errors name Field: a bound
// (MaxOutput, a value above maxValue) or a target with no value yet.
func (t *Template) Render(v Values) (*unstructured.Unstructured, error) {
	budget := MaxOutput
	out, err := render(t.obj, v, &budget)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Field, err)
	}
	u := &unstructured.Unstructured{Object: out.(map[string]any)}
	for path, ph := range t.targets {
		keys := strings.Split(path, ".")
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, keys...); found {
			continue
		}
		val, err := substitute(ph, v, &budget)
		if err == nil && val == "" {
			err = fmt.Errorf("%s has no value yet", ph)
		}
		if err == nil {
			err = unstructured.SetNestedField(u.Object, val, keys...)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: filling %s: %w", Field, path, err)
		}
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		u.SetGenerateName(v.Name + "-")
	}
	return u, nil
}

// render copies v with every string substituted, spending *budget on keys
// and strings.
func render(v any, vals Values, budget *int) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if *budget -= len(k); *budget < 0 {
				return nil, errTooLarge
			}
			r, err := render(e, vals, budget)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := render(e, vals, budget)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case string:
		return substitute(v, vals, budget)
	}
	return v, nil
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func orRoot(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}
