package boundaries

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// GroupKind names a kind the crd upgrade strategy may create: API group
// ("" is the core group) and kind, e.g. {upgrademgr.keikoproj.io,
// RollingUpgrade}.
type GroupKind struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

func (g GroupKind) String() string {
	if g.Group == "" {
		return g.Kind
	}
	return g.Kind + "." + g.Group
}

// DefaultCRDKinds is what the crd strategy may create when the ConfigMap
// does not say: the upgrade-manager RollingUpgrade only.
var DefaultCRDKinds = []GroupKind{{Group: "upgrademgr.keikoproj.io", Kind: "RollingUpgrade"}}

// forbiddenCRDGroups may never be created by the crd strategy, whatever
// the ConfigMap says: core objects (Pods, Secrets, Events...) and
// InstanceGroups themselves would hand the controller's rights to tenants.
var forbiddenCRDGroups = []string{"", "instancemgr.keikoproj.io", "rbac.authorization.k8s.io", "admissionregistration.k8s.io"}

// AllowsCRDKind reports whether the crd strategy may create kind of group.
// A nil Config allows DefaultCRDKinds.
func (c *Config) AllowsCRDKind(group, kind string) bool {
	kinds := DefaultCRDKinds
	if c != nil {
		kinds = c.CRDKinds
	}
	return slices.Contains(kinds, GroupKind{Group: group, Kind: kind})
}

// CRDKindList renders the allowed kinds for messages, e.g.
// "RollingUpgrade.upgrademgr.keikoproj.io", or "none".
func (c *Config) CRDKindList() string {
	kinds := DefaultCRDKinds
	if c != nil {
		kinds = c.CRDKinds
	}
	if len(kinds) == 0 {
		return "none"
	}
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

// tenancy parses the keys excludedNamespaces (a list of namespace names),
// sharedAnnotations (a list of BehaviourAnnotations), crdStrategy
// ({allowedKinds: [{group, kind}]}) and quotas (see Quotas) into c.
func (p *parser) tenancy(c *Config, data map[string]string) {
	if v, ok := p.yaml(data, KeyExcludedNamespaces); ok {
		for i, s := range p.stringList(v, KeyExcludedNamespaces, "namespace names") {
			if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
				p.addf("data.%s[%d]: %q is not a namespace name: %s", KeyExcludedNamespaces, i, s, strings.Join(msgs, "; "))
				continue
			}
			c.ExcludedNamespaces = append(c.ExcludedNamespaces, s)
		}
	}
	if v, ok := p.yaml(data, KeySharedAnnotations); ok {
		for i, s := range p.stringList(v, KeySharedAnnotations, "annotation keys") {
			if !slices.Contains(BehaviourAnnotations, s) {
				p.addf("data.%s[%d]: %q is not a behaviour annotation (valid: %s)", KeySharedAnnotations, i, s, strings.Join(BehaviourAnnotations, ", "))
				continue
			}
			c.SharedAnnotations = append(c.SharedAnnotations, s)
		}
	}
	if _, ok := data[KeyCRDStrategy]; ok && strings.TrimSpace(data[KeyCRDStrategy]) != "" {
		var cs struct {
			AllowedKinds []GroupKind `json:"allowedKinds"`
		}
		if err := decodeStrict(data[KeyCRDStrategy], &cs); err != nil {
			p.addf("data.%s%v (expected {allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade}]})", KeyCRDStrategy, err)
		} else {
			c.CRDKinds = []GroupKind{}
			for i, k := range cs.AllowedKinds {
				at := fmt.Sprintf("data.%s.allowedKinds[%d]", KeyCRDStrategy, i)
				switch {
				case k.Kind == "" || strings.Contains(k.Kind, "*") || strings.Contains(k.Group, "*"):
					p.addf("%s: needs a kind and a group, without wildcards", at)
				case slices.Contains(forbiddenCRDGroups, k.Group):
					p.addf("%s: kind %s of group %s cannot be created by the crd strategy: it would act with the controller's rights for tenants "+
						"(refused groups: %s); allow a kind of another group, e.g. {group: upgrademgr.keikoproj.io, kind: RollingUpgrade}",
						at, k.Kind, groupName(k.Group), refusedGroups())
				default:
					c.CRDKinds = append(c.CRDKinds, k)
				}
			}
		}
	}
	if _, ok := data[KeyQuotas]; ok && strings.TrimSpace(data[KeyQuotas]) != "" {
		q := &Quotas{}
		if err := decodeStrict(data[KeyQuotas], q); err != nil {
			p.addf("data.%s%v", KeyQuotas, err)
		} else {
			for _, pr := range q.validate() {
				p.addf("data.%s.%s", KeyQuotas, pr)
			}
			c.Quotas = q
		}
	}
}

// stringList requires v to be a list of strings.
func (p *parser) stringList(v any, key, what string) []string {
	l, ok := v.([]any)
	if !ok {
		p.addf("data.%s: expected a list of %s, got %s", key, what, kindOf(v))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			p.addf("data.%s[%d]: expected a string, got %s", key, i, kindOf(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: ")), " ")
}

// groupName is an API group for messages: "" is the core group.
func groupName(g string) string {
	if g == "" {
		return `"" (core: Secrets, ConfigMaps, Pods, ...)`
	}
	return strconv.Quote(g)
}

// refusedGroups lists forbiddenCRDGroups for messages.
func refusedGroups() string {
	names := make([]string, len(forbiddenCRDGroups))
	for i, g := range forbiddenCRDGroups {
		names[i] = strconv.Quote(g)
	}
	return strings.Join(names, ", ")
}

// decodeStrict decodes the YAML of one data key into v, refusing unknown
// fields. Its error starts with the path inside the key where there is
// one (".perNamespace.maxGroups: expected an integer, got a string"),
// and with ": " otherwise, so that "data.<key>" + err reads as one message.
func decodeStrict(data string, v any) error {
	j, err := yaml.YAMLToJSONStrict([]byte(data))
	if err != nil {
		return fmt.Errorf(": malformed YAML: %s", oneLine(err))
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf(".%s: expected %s, got %s", typeErr.Field, jsonKind(typeErr.Type), jsonValue(typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf(": unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return fmt.Errorf(": %s", oneLine(err))
	}
}

// jsonKind names what a Go type holds, for messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// jsonValue names what encoding/json says a value was, for messages.
func jsonValue(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case strings.HasPrefix(v, "number"):
		return "the number" + strings.TrimPrefix(v, "number")
	}
	return v
}
