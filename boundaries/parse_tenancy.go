package boundaries

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

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
	p.crdStrategy(c, data)
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
