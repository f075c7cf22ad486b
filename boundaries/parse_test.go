package boundaries

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestParseExampleConfigMap(t *testing.T) {
	c := mustParse(t, exampleData)
	want := &Config{
		Restricted: []string{
			"spec.eks.configuration.clusterName",
			"spec.eks.configuration.image",
			"spec.eks.configuration.roleName",
			"spec.eks.configuration.instanceProfileName",
			"spec.eks.configuration.keyPairName",
			"spec.eks.configuration.securityGroups",
			"spec.eks.configuration.subnets",
			"spec.eks.configuration.taints",
		},
		Merge:         []string{"spec.eks.configuration.labels"},
		MergeOverride: []string{"spec.eks.configuration.tags"},
		Replace:       []string{"spec.strategy"},
		// The defaults YAML without its "spec:" line: the same document, one level down.
		Defaults:    canon(t, map[string]any{"spec": specOf(t, strings.TrimPrefix(exampleData["defaults"], "spec:\n"))}).(map[string]any),
		Enforcement: EnforcementWarn,
		Sensitive:   SensitivePaths,
		CRDKinds:    DefaultCRDKinds,
		// The default quotas written out, with an instance type allowlist.
		Quotas: &Quotas{
			PerNamespace: &Quota{MaxGroups: ptrTo(10), MaxSize: ptrTo(50), MaxTotalVCPU: ptrTo(512), MaxVolumeSize: ptrTo(1024), MaxWarmPoolSize: ptrTo(50),
				InstanceTypes: []string{"m5*.*", "c5*.*", "r5*.*", "t3.*", "t2.*"}},
			Total: &Quota{MaxGroups: ptrTo(200), MaxTotalVCPU: ptrTo(4096)},
		},
	}
	if d := DefaultQuotas(); *d.PerNamespace.MaxGroups != *want.Quotas.PerNamespace.MaxGroups || *d.PerNamespace.MaxTotalVCPU != *want.Quotas.PerNamespace.MaxTotalVCPU ||
		*d.Total.MaxGroups != *want.Quotas.Total.MaxGroups {
		t.Error("the example's quotas no longer write out the defaults (docs/boundaries.md, \"Quotas\")")
	}
	if mu, _ := getPath(c.Defaults, []string{"spec", "strategy", "rollingUpdate", "maxUnavailable"}); mu != int64(1) {
		t.Errorf("maxUnavailable = %#v, want int64(1)", mu)
	}
	if !reflect.DeepEqual(want, c) {
		t.Errorf("Parse(example) =\n%#v\nwant\n%#v", c, want)
	}
}

// The copy in helpers_test.go is the ConfigMap of examples/.
func TestExampleConfigMapFile(t *testing.T) {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(exampleFile(t, "boundaries-configmap.yaml"), &cm); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cm.Data, exampleData) {
		t.Fatalf("examples/boundaries-configmap.yaml differs from exampleData:\n%#v", cm.Data)
	}
	var ig struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(exampleFile(t, "tenant-short.yaml"), &ig); err != nil {
		t.Fatal(err)
	}
	if d := diff(t, specOf(t, tenantShortSpec), ig.Spec); d != "" {
		t.Fatalf("examples/tenant-short.yaml differs from tenantShortSpec:\n%s", d)
	}
}

// The ConfigMap shown in BOUNDARIES.md, conditionals included, parses unchanged.
func TestParseBoundariesDocExample(t *testing.T) {
	c := mustParse(t, map[string]string{
		"boundaries": `restricted:            # admin-owned paths
- spec.eks.configuration.image
- spec.eks.configuration.subnets
shared:
  merge:               # maps/lists unioned; on conflict the DEFAULT wins
  - spec.eks.configuration.labels
  mergeOverride:       # maps/lists unioned; on conflict the TENANT wins
  - spec.eks.configuration.tags
  replace:             # tenant value, if present, replaces the default whole
  - spec.strategy
`,
		"defaults": `              # a partial InstanceGroup, starting at spec:
spec:
  provisioner: eks
  eks:
    configuration:
      image: ami-1234
`,
		"conditionals": `          # extra defaults for IGs whose ANNOTATIONS match
- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows'
  defaults:
    spec:
      eks:
        configuration:
          image: ami-windows
`,
		"enforcement": "warn",
		"rollout":     "{maxConcurrentUpgrades: 3}",
	})
	if len(c.Conditionals) != 1 || c.Conditionals[0].Selector == nil ||
		c.Conditionals[0].AnnotationSelector != "instancemgr.keikoproj.io/os-family = windows" {
		t.Fatalf("conditionals = %#v", c.Conditionals)
	}
	if c.MaxConcurrentUpgrades != 3 || c.Enforcement != EnforcementWarn {
		t.Errorf("rollout/enforcement = %d/%q", c.MaxConcurrentUpgrades, c.Enforcement)
	}
	res, err := c.Effective(Input{Annotations: map[string]string{"instancemgr.keikoproj.io/os-family": "windows"}})
	if err != nil {
		t.Fatal(err)
	}
	if img, _ := getPath(res.Spec, []string{"eks", "configuration", "image"}); img != "ami-windows" {
		t.Errorf("image = %v, want ami-windows", img)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  map[string]string
		check func(*Config) bool
	}{
		{"nil data", nil, func(c *Config) bool {
			return reflect.DeepEqual(c, &Config{Enforcement: EnforcementWarn, Sensitive: SensitivePaths, CRDKinds: DefaultCRDKinds})
		}},
		{"blank values are absent", map[string]string{"boundaries": "", "defaults": "  \n", "conditionals": "# none yet\n", "enforcement": "", "rollout": "~"},
			func(c *Config) bool {
				return reflect.DeepEqual(c, &Config{Enforcement: EnforcementWarn, Sensitive: SensitivePaths, CRDKinds: DefaultCRDKinds})
			}},
		{"one explicit YAML document", map[string]string{"enforcement": "---\ndeny\n...\n"}, func(c *Config) bool { return c.Enforcement == EnforcementDeny }},
		{"deny", map[string]string{"enforcement": "deny\n"}, func(c *Config) bool { return c.Enforcement == EnforcementDeny }},
		{"warn", map[string]string{"enforcement": "'warn'"}, func(c *Config) bool { return c.Enforcement == EnforcementWarn }},
		{"rollout", map[string]string{"rollout": "maxConcurrentUpgrades: 5\n"}, func(c *Config) bool { return c.MaxConcurrentUpgrades == 5 }},
		{"empty spec defaults", map[string]string{"defaults": "spec: {}"}, func(c *Config) bool { return c.Defaults == nil }},
		{"null entries in defaults are dropped", map[string]string{"defaults": "spec: {provisioner: eks, eks: null}"},
			func(c *Config) bool {
				return reflect.DeepEqual(c.Defaults, map[string]any{"spec": map[string]any{"provisioner": "eks"}})
			}},
		{"conditional without selector matches every group", map[string]string{"conditionals": "- defaults: {spec: {provisioner: eks}}"},
			func(c *Config) bool { return len(c.Conditionals) == 1 && c.Conditionals[0].Selector.Empty() }},
		{"conditional without defaults", map[string]string{"conditionals": "- annotationSelector: a=b"},
			func(c *Config) bool { return len(c.Conditionals) == 1 && c.Conditionals[0].Defaults == nil }},
		{"paths into every provisioner", map[string]string{"boundaries": "restricted: [spec.eks-managed.configuration.nodeRole, spec.eks-fargate.podExecutionRoleArn, spec.eks.configuration.taints]\nshared: {merge: [spec.eks-fargate.selectors], mergeOverride: [spec.eks.configuration.volumes], replace: [spec.strategy.crd]}"},
			func(c *Config) bool { return len(c.Restricted) == 3 && len(c.Merge) == 1 }},
		{"nested paths under different rules", map[string]string{"boundaries": "restricted: [spec.eks.configuration.image]\nshared: {replace: [spec.eks.configuration]}"},
			func(c *Config) bool { return len(c.Restricted) == 1 && len(c.Replace) == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.data)
			if !tc.check(c) {
				t.Errorf("unexpected config %#v", c)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want []string // one per problem, in order, each a substring
	}{
		{"unknown key", map[string]string{"boundary": "x", "defaults": "spec: {provisioner: eks}"},
			[]string{"data.boundary: unknown key (valid: allowlists, boundaries, conditionals, crdStrategy, defaults, drains, enforcement, excludedNamespaces, nodeIsolation, quotas, rollout, sharedAnnotations)"}},
		{"malformed YAML", map[string]string{"boundaries": "restricted: [spec.eks", "defaults": "spec:\n\tprovisioner: eks"},
			[]string{"data.boundaries: malformed YAML: yaml: line 1", "data.defaults: malformed YAML: yaml: line 2"}},
		{"duplicate YAML key", map[string]string{"boundaries": "restricted: [spec.strategy]\nrestricted: [spec.eks]"},
			[]string{`data.boundaries: malformed YAML: yaml: unmarshal errors: line 2: key "restricted" already set in map`}},
		{"several YAML documents", map[string]string{"boundaries": "restricted: [spec.eks]\n---\nrestricted: [spec.nope]\n---\n"},
			[]string{"data.boundaries: 2 YAML documents (separated by ---); one is expected"}},
		{"boundaries not an object", map[string]string{"boundaries": "- spec.eks"},
			[]string{"data.boundaries: expected an object with restricted and shared, got a list"}},
		{"unknown fields in boundaries", map[string]string{"boundaries": "restrcted: [spec.eks]\nshared: {merged: [spec.eks]}"},
			[]string{`data.boundaries: unknown field "restrcted" (valid: restricted, shared)`, `data.boundaries.shared: unknown field "merged" (valid: merge, mergeOverride, replace)`}},
		{"shared not an object", map[string]string{"boundaries": "shared: [spec.eks]"},
			[]string{"data.boundaries.shared: expected an object with merge, mergeOverride and replace, got a list"}},
		{"list not a list", map[string]string{"boundaries": "restricted: spec.eks"},
			[]string{"data.boundaries.restricted: expected a list of paths, got a string"}},
		{"path not a string", map[string]string{"boundaries": "shared: {replace: [1, {a: b}]}"},
			[]string{"data.boundaries.shared.replace[0]: expected a path string, got a number", "data.boundaries.shared.replace[1]: expected a path string, got an object"}},
		{"unknown paths", map[string]string{"boundaries": "restricted: [spec.eks.configuration.imag, metadata.labels, spec.eks.configuration.labels.team]"},
			[]string{
				`data.boundaries.restricted[0]: unknown path "spec.eks.configuration.imag": spec.eks.configuration has no field "imag" (valid: image, `,
				`data.boundaries.restricted[1]: unknown path "metadata.labels": paths start at the object root with "spec."`,
				`data.boundaries.restricted[2]: unknown path "spec.eks.configuration.labels.team": spec.eks.configuration.labels is a map`,
			}},
		{"restricted and shared", map[string]string{"boundaries": "restricted: [spec.eks.configuration.labels]\nshared: {merge: [spec.eks.configuration.labels]}"},
			[]string{`data.boundaries.shared.merge[0]: "spec.eks.configuration.labels" is both restricted (at restricted[0]) and shared; a path takes one rule`}},
		{"two shared lists", map[string]string{"boundaries": "shared: {merge: [spec.strategy], replace: [spec.eks, spec.strategy]}"},
			[]string{`data.boundaries.shared.replace[1]: "spec.strategy" is in two shared lists (first at shared.merge[0]); a path takes one rule`}},
		{"listed twice", map[string]string{"boundaries": "restricted: [spec.eks.configuration.image, spec.eks.configuration.image]"},
			[]string{`data.boundaries.restricted[1]: "spec.eks.configuration.image" is listed twice (first at restricted[0])`}},
		{"defaults not an object", map[string]string{"defaults": "- spec"},
			[]string{"data.defaults: expected a partial InstanceGroup starting at spec:, got a list"}},
		{"defaults with another root", map[string]string{"defaults": "metadata: {name: x}\nspec: {provisioner: eks}\nstatus: {}"},
			[]string{`data.defaults: unknown field "metadata" (valid: spec)`, `data.defaults: unknown field "status" (valid: spec)`}},
		{"defaults with unknown fields", map[string]string{"defaults": "spec: {eks: {configuration: {imag: ami-1, volumes: [{name: a, sise: 3}]}}, provisoner: eks}"},
			[]string{
				`data.defaults: spec.eks.configuration: unknown field "imag" (valid: image, `,
				`data.defaults: spec.eks.configuration.volumes[0]: unknown field "sise" (valid: size, `,
				`data.defaults: spec: unknown field "provisoner" (valid: provisioner, `,
			}},
		{"defaults with wrong types", map[string]string{"defaults": "spec: {eks: {minSize: two, configuration: {subnets: subnet-1, labels: {a: 1}, tags: [{key: a, value: b}], taints: [{key: a, effect: NoSchedule, timeAdded: yesterday}]}}, strategy: {rollingUpdate: {maxUnavailable: [1]}}}"},
			[]string{
				"data.defaults: spec.eks.configuration.labels[a]: expected a string, got a number",
				"data.defaults: spec.eks.configuration.subnets: expected a list, got a string",
				"data.defaults: spec.eks.configuration.taints[0].timeAdded: not a value of type v1.Time",
				"data.defaults: spec.eks.minSize: expected an integer, got a string",
				"data.defaults: spec.strategy.rollingUpdate.maxUnavailable: not a value of type intstr.IntOrString",
			}},
		{"defaults with a fraction for an integer", map[string]string{"defaults": "spec: {eks: {maxSize: 2.5}}"},
			[]string{"data.defaults: spec.eks.maxSize: expected an integer, got a number"}},
		{"conditionals not a list", map[string]string{"conditionals": "annotationSelector: a=b"},
			[]string{"data.conditionals: expected a list of {annotationSelector, defaults}, got an object"}},
		{"conditionals", map[string]string{"conditionals": `
- annotationSelector: 'os in (windows'
  defaults: {spec: {provisioner: eks}}
- selector: a=b
  defaults: {spec: {provisioner: eks}}
- annotationSelector: a=b
  defaults: {spec: {eks: {configuration: {imag: x}}}}
- annotationSelector: 7
- annotationSelector: a=b
  defaults: {spec: {}, metadata: {}}
- just a string
`},
			[]string{
				`data.conditionals[0].annotationSelector: invalid selector "os in (windows": `,
				`data.conditionals[1]: unknown field "selector" (valid: annotationSelector, defaults)`,
				`data.conditionals[2].defaults: spec.eks.configuration: unknown field "imag" (valid: image, `,
				`data.conditionals[3].annotationSelector: expected a selector string, got a number`,
				`data.conditionals[4].defaults: unknown field "metadata" (valid: spec)`,
				`data.conditionals[5]: expected an object with annotationSelector and defaults, got a string`,
			}},
		{"enforcement", map[string]string{"enforcement": "strict"},
			[]string{`data.enforcement: "strict" is not an enforcement (valid: warn, deny)`}},
		{"enforcement is case-sensitive", map[string]string{"enforcement": "Deny"},
			[]string{`data.enforcement: "Deny" is not an enforcement (valid: warn, deny)`}},
		{"enforcement not a string", map[string]string{"enforcement": "true"},
			[]string{`data.enforcement: expected warn or deny, got a boolean`}},
		{"rollout zero", map[string]string{"rollout": "maxConcurrentUpgrades: 0"},
			[]string{"data.rollout.maxConcurrentUpgrades: 0 is out of range (valid: an integer from 1 to 2147483647)"}},
		{"rollout negative", map[string]string{"rollout": "maxConcurrentUpgrades: -2"},
			[]string{"data.rollout.maxConcurrentUpgrades: -2 is out of range"}},
		{"rollout fraction", map[string]string{"rollout": "maxConcurrentUpgrades: 1.5"},
			[]string{"data.rollout.maxConcurrentUpgrades: expected an integer >= 1, got a number"}},
		{"rollout string", map[string]string{"rollout": "maxConcurrentUpgrades: '2'"},
			[]string{"data.rollout.maxConcurrentUpgrades: expected an integer >= 1, got a string"}},
		{"rollout empty object", map[string]string{"rollout": "{}"},
			[]string{"data.rollout: empty: set maxConcurrentUpgrades (an integer >= 1), waves, windows, freezes or namespaceMaintenance"}},
		{"rollout unknown field", map[string]string{"rollout": "maxConcurrent: 2\nmaxConcurrentUpgrades: 2"},
			[]string{`data.rollout: unknown field "maxConcurrent" (valid: maxConcurrentUpgrades, waves, soak, failure, tenants, windows, freezes, namespaceMaintenance)`}},
		{"rollout scalar", map[string]string{"rollout": "5"},
			[]string{"data.rollout: expected an object with maxConcurrentUpgrades, waves, windows, freezes and/or namespaceMaintenance, got a number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.data)
			if err == nil {
				t.Fatalf("Parse accepted it: %#v", c)
			}
			if c != nil {
				t.Errorf("Parse returned a Config with its error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError: %v", err, err)
			}
			if len(ce.Problems) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(ce.Problems), len(tc.want), strings.Join(ce.Problems, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(ce.Problems[i], w) {
					t.Errorf("problem %d = %q\nwant it to contain %q", i, ce.Problems[i], w)
				}
			}
		})
	}
}

// Every problem of every key is reported, in one error.
func TestParseCollectsAllProblems(t *testing.T) {
	_, err := Parse(map[string]string{
		"boundaries":   "restricted: [spec.nope]",
		"defaults":     "spec: {nope: 1}",
		"conditionals": "- annotationSelector: '!!'",
		"enforcement":  "maybe",
		"rollout":      "maxConcurrentUpgrades: 0",
		"extra":        "",
	})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	keys := []string{"data.extra:", "data.boundaries.restricted[0]:", "data.defaults:", "data.conditionals[0].annotationSelector:", "data.enforcement:", "data.rollout.maxConcurrentUpgrades:"}
	if len(ce.Problems) != len(keys) {
		t.Fatalf("problems:\n%s", strings.Join(ce.Problems, "\n"))
	}
	for i, k := range keys {
		if !strings.HasPrefix(ce.Problems[i], k) {
			t.Errorf("problem %d = %q, want prefix %q", i, ce.Problems[i], k)
		}
		if !strings.Contains(err.Error(), ce.Problems[i]) {
			t.Errorf("Error() lacks problem %d: %s", i, err)
		}
	}
	if !strings.HasPrefix(err.Error(), "invalid boundary ConfigMap (6 problems): data.extra: unknown key") {
		t.Errorf("Error() = %s", err)
	}
	_, err = Parse(map[string]string{"enforcement": "maybe"})
	if err == nil || err.Error() != `invalid boundary ConfigMap: data.enforcement: "maybe" is not an enforcement (valid: warn, deny)` {
		t.Errorf("one problem: %v", err)
	}
}

// FuzzParse: any data never panics; a parsed Config hashes deterministically
// and computes an effective spec for an empty submission.
func FuzzParse(f *testing.F) {
	f.Add(exampleData["boundaries"], exampleData["defaults"], "", "", "", "")
	f.Add("restricted: [spec.eks.configuration.image]", "spec: {eks: {configuration: {image: x}}}",
		"- annotationSelector: 'a in (b, c), !d'\n  defaults: {spec: {eks: {minSize: 3}}}", "deny", "maxConcurrentUpgrades: 2", "")
	f.Add("shared: {merge: [spec.eks.configuration], mergeOverride: [spec.eks.configuration.tags]}", "spec: {strategy: {rollingUpdate: {maxUnavailable: 10%}}}", "[]", "warn", "{}", "other")
	f.Add("restricted: [spec..x, spec]\nshared: {replace: [spec.eks-fargate.selectors]}", "spec: {eks: {configuration: {taints: [{key: a, effect: NoSchedule, timeAdded: '2024-01-01T00:00:00Z'}]}}}", "- 1", "&a [*a]", "maxConcurrentUpgrades: 1e3", "")
	f.Add("a: &a [*a, *a]\nb: *a", "spec: !!binary aGVsbG8=", "- annotationSelector: x\n  defaults: {spec: {eks-managed: {configuration: {instanceTypes: [a]}}}}", "", "maxConcurrentUpgrades: 99999999999999999999", "boundaries")
	f.Fuzz(func(t *testing.T, boundaries, defaults, conditionals, enforcement, rollout, extraKey string) {
		data := map[string]string{
			KeyBoundaries: boundaries, KeyDefaults: defaults, KeyConditionals: conditionals,
			KeyEnforcement: enforcement, KeyRollout: rollout,
		}
		if extraKey != "" {
			data[extraKey] = "x"
		}
		c, err := Parse(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 || c != nil {
				t.Fatalf("bad error shape: %T %v, config %v", err, err, c)
			}
			return
		}
		if c.Hash(false) != c.Hash(false) || c.Hash(false) == c.Hash(true) {
			t.Fatal("hash not deterministic or ignores the excluded flag")
		}
		again, err := Parse(data)
		if err != nil || again.Hash(false) != c.Hash(false) {
			t.Fatalf("re-parse: %v", err)
		}
		res, err := c.Effective(Input{})
		if err != nil {
			t.Fatalf("Effective of an empty submission: %v", err)
		}
		if len(res.Overrides) != 0 {
			t.Fatalf("overrides without a submission: %v", res.Overrides)
		}
		if _, err := json.Marshal(res.Spec); err != nil {
			t.Fatal(err)
		}
		// Defaults decode into the API types, so the effective spec of an
		// empty submission does too.
		if _, err := DecodeSpec(res.Spec); err != nil {
			t.Fatalf("effective spec of the defaults does not decode: %v", err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(exampleData); err != nil {
			b.Fatal(err)
		}
	}
}
