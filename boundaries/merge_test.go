package boundaries

import (
	"strings"
	"testing"
)

func TestMergeShared(t *testing.T) {
	for _, tc := range []struct {
		name      string
		field     string
		d, t      string // YAML
		merge     string // want under merge
		override  string // want under mergeOverride
		errSubstr string
	}{
		{
			name: "tags by key (worked example)", field: "tags",
			d:        "[{key: tag-A, value: value-A}, {key: tag-B, value: value-B}]",
			t:        "[{key: tag-A, value: value-D}, {key: tag-C, value: value-C}]",
			merge:    "[{key: tag-A, value: value-A}, {key: tag-B, value: value-B}, {key: tag-C, value: value-C}]",
			override: "[{key: tag-A, value: value-D}, {key: tag-B, value: value-B}, {key: tag-C, value: value-C}]",
		},
		{
			name: "volumes by name: whole elements, not merged inside", field: "volumes",
			d:        "[{name: /dev/xvda, size: 50, type: gp3}]",
			t:        "[{name: /dev/xvdb, size: 10}, {name: /dev/xvda, size: 100}]",
			merge:    "[{name: /dev/xvda, size: 50, type: gp3}, {name: /dev/xvdb, size: 10}]",
			override: "[{name: /dev/xvda, size: 100}, {name: /dev/xvdb, size: 10}]",
		},
		{
			name: "lifecycleHooks by name", field: "lifecycleHooks",
			d:        "[{name: drain, lifecycle: terminate}]",
			t:        "[{name: drain, lifecycle: launch}]",
			merge:    "[{name: drain, lifecycle: terminate}]",
			override: "[{name: drain, lifecycle: launch}]",
		},
		{
			name: "userData by name", field: "userData",
			d:        "[{name: a, stage: PreBootstrap, data: x}]",
			t:        "[{name: b, data: y}, {name: a, data: z}]",
			merge:    "[{name: a, stage: PreBootstrap, data: x}, {name: b, data: y}]",
			override: "[{name: a, data: z}, {name: b, data: y}]",
		},
		{
			name: "taints by key and effect", field: "taints",
			d:        "[{key: a, value: '1', effect: NoSchedule}, {key: b, value: '1', effect: NoSchedule}]",
			t:        "[{key: a, value: '2', effect: NoExecute}, {key: b, value: '2', effect: NoSchedule}]",
			merge:    "[{key: a, value: '1', effect: NoSchedule}, {key: b, value: '1', effect: NoSchedule}, {key: a, value: '2', effect: NoExecute}]",
			override: "[{key: a, value: '1', effect: NoSchedule}, {key: b, value: '2', effect: NoSchedule}, {key: a, value: '2', effect: NoExecute}]",
		},
		{
			name: "instanceTypes by type", field: "instanceTypes",
			d:        "[{type: m5.large, weight: 1}]",
			t:        "[{type: m5.large, weight: 2}, {type: c5.large}]",
			merge:    "[{type: m5.large, weight: 1}, {type: c5.large}]",
			override: "[{type: m5.large, weight: 2}, {type: c5.large}]",
		},
		{
			name: "instanceTypes of eks-managed are strings", field: "instanceTypes",
			d: "[m5.large, c5.large]", t: "[c5.large, r5.large]",
			merge: "[m5.large, c5.large, r5.large]", override: "[m5.large, c5.large, r5.large]",
		},
		{
			name: "fargate selectors by namespace", field: "selectors",
			d:        "[{namespace: kube-system}]",
			t:        "[{namespace: kube-system, labels: {a: b}}, {namespace: team-a}]",
			merge:    "[{namespace: kube-system}, {namespace: team-a}]",
			override: "[{namespace: kube-system, labels: {a: b}}, {namespace: team-a}]",
		},
		{
			name: "scalars unioned without duplicates, default first", field: "securityGroups",
			d: "[sg-1, sg-2, sg-1]", t: "[sg-3, sg-2, sg-3]",
			merge: "[sg-1, sg-2, sg-3]", override: "[sg-1, sg-2, sg-3]",
		},
		{
			name: "scalars of different JSON types are different", field: "x",
			d: "[1, '1', true]", t: "['true', 1, 1.5]",
			merge: "[1, '1', true, 'true', 1.5]", override: "[1, '1', true, 'true', 1.5]",
		},
		{
			name: "objects without an identity key: deep equality", field: "metricsCollection",
			d: "[{a: 1}, {a: 2}]", t: "[{a: 2}, {a: 3}, {a: 1, b: 1}]",
			merge: "[{a: 1}, {a: 2}, {a: 3}, {a: 1, b: 1}]", override: "[{a: 1}, {a: 2}, {a: 3}, {a: 1, b: 1}]",
		},
		{
			name: "keyed elements missing the key fall back to deep equality", field: "tags",
			d:        "[{key: a, value: '1'}, {value: orphan}]",
			t:        "[{value: orphan}, {key: a, value: '2'}, {value: other}, {key: null, value: x}]",
			merge:    "[{key: a, value: '1'}, {value: orphan}, {value: other}, {value: x}]",
			override: "[{key: a, value: '2'}, {value: orphan}, {value: other}, {value: x}]",
		},
		{
			name: "taints need both key and effect to be keyed", field: "taints",
			d:        "[{key: a, value: '1'}]",
			t:        "[{key: a, value: '2'}]",
			merge:    "[{key: a, value: '1'}, {key: a, value: '2'}]",
			override: "[{key: a, value: '1'}, {key: a, value: '2'}]",
		},
		{
			name: "the tenant's first duplicate wins under mergeOverride", field: "tags",
			d:        "[{key: a, value: '0'}]",
			t:        "[{key: a, value: '1'}, {key: a, value: '2'}, {key: b, value: '3'}, {key: b, value: '4'}]",
			merge:    "[{key: a, value: '0'}, {key: b, value: '3'}]",
			override: "[{key: a, value: '1'}, {key: b, value: '3'}]",
		},
		{
			name: "key values compare as JSON: 1 and '1' differ", field: "tags",
			d: "[{key: 1, value: a}]", t: "[{key: '1', value: b}]",
			merge: "[{key: 1, value: a}, {key: '1', value: b}]", override: "[{key: 1, value: a}, {key: '1', value: b}]",
		},
		{
			name: "maps unioned recursively", field: "labels",
			d:        "{a: '1', nested: {x: '1', y: '1'}}",
			t:        "{b: '2', nested: {y: '2', z: '2'}}",
			merge:    "{a: '1', b: '2', nested: {x: '1', y: '1', z: '2'}}",
			override: "{a: '1', b: '2', nested: {x: '1', y: '2', z: '2'}}",
		},
		{
			name: "lists inside maps use the key they sit under", field: "configuration",
			d:        "{tags: [{key: a, value: '1'}]}",
			t:        "{tags: [{key: a, value: '2'}]}",
			merge:    "{tags: [{key: a, value: '1'}]}",
			override: "{tags: [{key: a, value: '2'}]}",
		},
		{
			name: "scalars: a conflict", field: "image",
			d: "ami-1", t: "ami-2", merge: "ami-1", override: "ami-2",
		},
		{
			name: "scalars of different types: still a conflict", field: "volSize",
			d: "20", t: "'30'", merge: "20", override: "'30'",
		},
		{name: "object and list", field: "labels", d: "{a: b}", t: "[a]", errSubstr: "spec.x: cannot merge the submitted value (a list) with the default (an object); give an object"},
		{name: "list and object", field: "tags", d: "[a]", t: "{a: b}", errSubstr: "spec.x: cannot merge the submitted value (an object) with the default (a list)"},
		{name: "list and scalar", field: "tags", d: "[a]", t: "a", errSubstr: "(a string) with the default (a list)"},
		{name: "scalar and object", field: "image", d: "a", t: "{a: b}", errSubstr: "(an object) with the default (a string)"},
		{name: "nested conflict names the inner path", field: "labels", d: "{a: {b: c}}", t: "{a: [c]}", errSubstr: "spec.x.a: cannot merge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, tv := canon(t, yamlValue(t, tc.d)), canon(t, yamlValue(t, tc.t))
			dBefore, tBefore := deepCopy(d), deepCopy(tv)
			for _, override := range []bool{false, true} {
				got, err := mergeShared(d, tv, tc.field, override, "spec.x")
				if tc.errSubstr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
						t.Fatalf("override=%v: err = %v, want %q", override, err, tc.errSubstr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				want := tc.merge
				if override {
					want = tc.override
				}
				if dd := diff(t, yamlValue(t, want), got); dd != "" {
					t.Errorf("override=%v (-want +got):\n%s", override, dd)
				}
				// Merging again with the result as the tenant's value changes nothing.
				again, err := mergeShared(d, got, tc.field, override, "spec.x")
				if err != nil {
					t.Fatal(err)
				}
				if dd := diff(t, got, again); dd != "" {
					t.Errorf("override=%v: not idempotent (-once +twice):\n%s", override, dd)
				}
			}
			if diff(t, dBefore, d) != "" || diff(t, tBefore, tv) != "" {
				t.Error("inputs were modified")
			}
		})
	}
}

func TestOverlay(t *testing.T) {
	for _, tc := range []struct{ base, top, want string }{
		{"{a: 1, b: {c: 1, d: [1, 2]}}", "{b: {d: [3], e: 1}, f: x}", "{a: 1, b: {c: 1, d: [3], e: 1}, f: x}"},
		{"{a: {b: 1}}", "{a: x}", "{a: x}"},
		{"{a: x}", "{a: {b: 1}}", "{a: {b: 1}}"},
		{"{a: 1}", "null", "{a: 1}"},
		{"null", "{a: 1}", "{a: 1}"},
	} {
		got := overlay(canon(t, yamlValue(t, tc.base)), canon(t, yamlValue(t, tc.top)))
		if d := diff(t, yamlValue(t, tc.want), got); d != "" {
			t.Errorf("overlay(%s, %s) (-want +got):\n%s", tc.base, tc.top, d)
		}
	}
}

// yamlValue decodes any YAML value (not only objects).
func yamlValue(t testing.TB, y string) any {
	t.Helper()
	m := specOf(t, "v: "+y)
	if m == nil {
		return nil
	}
	return m["v"]
}
