package boundaries

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIntent(t *testing.T) {
	c := mustParse(t, exampleData)
	submitted := specOf(t, tenantShortSpec)
	first, err := c.Effective(Input{Spec: submitted})
	if err != nil {
		t.Fatal(err)
	}
	stored := first.Spec

	// edit returns a copy of the stored spec changed by f, as kubectl edit
	// or a client-side apply would send it.
	edit := func(f func(spec map[string]any)) map[string]any {
		cp := deepCopy(stored).(map[string]any)
		f(cp)
		return cp
	}
	conf := func(spec map[string]any) map[string]any {
		v, _ := getPath(spec, []string{"eks", "configuration"})
		return v.(map[string]any)
	}

	for _, tc := range []struct {
		name          string
		incoming      any
		wantSubmitted string // YAML of the new submitted spec
		wantOverrides []string
		check         func(t *testing.T, effective map[string]any)
	}{
		{
			name:          "no-op re-apply of the effective spec",
			incoming:      stored,
			wantSubmitted: tenantShortSpec,
		},
		{
			name:          "server-side apply of the short manifest drops every defaulted field",
			incoming:      submitted,
			wantSubmitted: tenantShortSpec,
		},
		{
			name:          "field change",
			incoming:      edit(func(s map[string]any) { s["eks"].(map[string]any)["maxSize"] = int64(6) }),
			wantSubmitted: strings.Replace(tenantShortSpec, "maxSize: 4", "maxSize: 6", 1),
		},
		{
			name:     "field change through server-side apply of a changed short manifest",
			incoming: specOf(t, strings.Replace(tenantShortSpec, "t2.small", "m5.large", 1)),
			// The manifest no longer lists what the webhook added; intent
			// is the manifest.
			wantSubmitted: strings.Replace(tenantShortSpec, "t2.small", "m5.large", 1),
		},
		{
			name:          "field removal",
			incoming:      edit(func(s map[string]any) { delete(conf(s), "instanceType") }),
			wantSubmitted: strings.Replace(tenantShortSpec, "    instanceType: t2.small\n", "", 1),
		},
		{
			name:          "field set to null is a removal",
			incoming:      edit(func(s map[string]any) { conf(s)["labels"] = nil }),
			wantSubmitted: strings.Replace(tenantShortSpec, "    labels:\n      test-label: \"true\"\n", "", 1),
			check: func(t *testing.T, eff map[string]any) {
				if got, _ := getPath(eff, []string{"eks", "configuration", "labels"}); diff(t, map[string]any{"a-default-label": "true"}, got) != "" {
					t.Errorf("labels = %v, want the default only", got)
				}
			},
		},
		{
			name: "list change: the whole list is the intent",
			incoming: edit(func(s map[string]any) {
				conf(s)["tags"] = append(conf(s)["tags"].([]any), map[string]any{"key": "new", "value": "v"})
			}),
			wantSubmitted: strings.Replace(tenantShortSpec, "    tags:\n", "    tags:\n    - {key: a-default-tag, value: a-default-value}\n", 1) + "    - {key: new, value: v}\n",
			check: func(t *testing.T, eff map[string]any) {
				tags, _ := getPath(eff, []string{"eks", "configuration", "tags"})
				if diff(t, yamlValue(t, "[{key: a-default-tag, value: a-default-value}, {key: tag-key, value: tag-value}, {key: new, value: v}]"), tags) != "" {
					t.Errorf("tags = %v", tags)
				}
			},
		},
		{
			name:          "restricted field edit: kept as intent, enforced by Effective",
			incoming:      edit(func(s map[string]any) { conf(s)["image"] = "ami-evil" }),
			wantSubmitted: tenantShortSpec + "    image: ami-evil\n",
			wantOverrides: []string{`spec.eks.configuration.image: "ami-evil" replaced by "ami-1234" (restricted)`},
		},
		{
			name:          "removing a restricted default changes nothing: it comes back",
			incoming:      edit(func(s map[string]any) { delete(conf(s), "image") }),
			wantSubmitted: tenantShortSpec,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Intent(mustJSON(t, stored), mustJSON(t, tc.incoming), mustJSON(t, submitted))
			if err != nil {
				t.Fatal(err)
			}
			var gotSpec map[string]any
			if err := json.Unmarshal(got, &gotSpec); err != nil {
				t.Fatal(err)
			}
			if d := diff(t, specOf(t, tc.wantSubmitted), gotSpec); d != "" {
				t.Errorf("submitted (-want +got):\n%s", d)
			}
			if string(got) != string(mustJSON(t, gotSpec)) {
				t.Errorf("result is not compact canonical JSON: %s", got)
			}
			res, err := c.Effective(Input{Spec: gotSpec})
			if err != nil {
				t.Fatal(err)
			}
			var overrides []string
			for _, o := range res.Overrides {
				overrides = append(overrides, o.String())
			}
			if strings.Join(overrides, "\n") != strings.Join(tc.wantOverrides, "\n") {
				t.Errorf("overrides = %v, want %v", overrides, tc.wantOverrides)
			}
			if tc.check != nil {
				tc.check(t, res.Spec)
			}
			// No flapping: the same request against the new stored state
			// leaves the submission as it is.
			again, err := Intent(mustJSON(t, res.Spec), mustJSON(t, tc.incoming), got)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(got) {
				t.Errorf("re-sent request changed the submission:\n%s\n%s", got, again)
			}
			// ...and neither does re-applying the new effective spec.
			if again, _ := Intent(mustJSON(t, res.Spec), mustJSON(t, res.Spec), got); string(again) != string(got) {
				t.Errorf("re-applying the effective spec changed the submission:\n%s\n%s", got, again)
			}
		})
	}
}

func TestIntentEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		stored, incoming, submitted string
		want, err                   string
	}{
		{name: "no submission annotation: the stored spec stands for it", stored: `{"a":1,"b":2}`, incoming: `{"a":1,"b":3}`, submitted: "", want: `{"a":1,"b":3}`},
		{name: "null submission", stored: `{"a":1}`, incoming: `{"a":2}`, submitted: "null", want: `{"a":2}`},
		{name: "empty stored and incoming", stored: "", incoming: " ", submitted: `{"a":1}`, want: `{"a":1}`},
		{name: "nested object change", stored: `{"x":{"a":1,"d":4}}`, incoming: `{"x":{"a":2,"d":4}}`, submitted: `{"x":{"b":1}}`, want: `{"x":{"a":2,"b":1}}`},
		{name: "nulls in the submission are dropped", stored: `{}`, incoming: `{}`, submitted: `{"a":null,"b":{"c":null}}`, want: `{"b":{}}`},
		{name: "keys sorted, compact", stored: `{}`, incoming: `{ "z": 1, "a": [ 1 ] }`, submitted: `{}`, want: `{"a":[1],"z":1}`},
		{name: "stored not JSON", stored: `{`, incoming: `{}`, submitted: `{}`, err: "intent: oldStored is not valid JSON"},
		{name: "incoming not an object", stored: `{}`, incoming: `[1]`, submitted: `{}`, err: "intent: incoming: expected an object, got a list"},
		{name: "submitted not an object", stored: `{}`, incoming: `{}`, submitted: `"x"`, err: "intent: oldSubmitted: expected an object, got a string"},
		{name: "trailing data", stored: `{} {}`, incoming: `{}`, submitted: `{}`, err: "intent: oldStored is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Intent([]byte(tc.stored), []byte(tc.incoming), []byte(tc.submitted))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
