package boundaries

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The documented outcome of the seed's example: the admin's ConfigMap plus
// the tenant's short InstanceGroup (examples/).
func TestEffectiveExampleConfigMapAndShortTenant(t *testing.T) {
	c := mustParse(t, exampleData)
	res, err := c.Effective(Input{Spec: specOf(t, tenantShortSpec)})
	if err != nil {
		t.Fatal(err)
	}
	want := specOf(t, `
provisioner: eks
strategy:
  type: rollingUpdate
  rollingUpdate:
    maxUnavailable: 1
eks:
  minSize: 2
  maxSize: 4
  configuration:
    clusterName: a-managed-cluster
    image: ami-1234
    instanceType: t2.small
    keyPairName: a-managed-keypair
    roleName: a-managed-role
    instanceProfileName: a-managed-profile
    subnets:
    - subnet-1234
    - subnet-2345
    - subnet-3456
    securityGroups:
    - sg-1234
    labels:
      a-default-label: "true"
      test-label: "true"
    taints:
    - key: default-taint
      value: a-taint
      effect: NoSchedule
    tags:
    - key: a-default-tag
      value: a-default-value
    - key: tag-key
      value: tag-value
`)
	if d := diff(t, want, res.Spec); d != "" {
		t.Errorf("effective spec (-want +got):\n%s", d)
	}
	if len(res.Overrides) != 0 {
		t.Errorf("overrides = %v, want none: the tenant set no restricted field", res.Overrides)
	}
	if res.Hash != c.Hash(false) {
		t.Errorf("Result.Hash %q != c.Hash(false) %q", res.Hash, c.Hash(false))
	}
	// The effective spec is a valid InstanceGroupSpec.
	spec, err := DecodeSpec(res.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.EKS.Configuration.Image; got != "ami-1234" {
		t.Errorf("decoded image = %q", got)
	}
}

// BOUNDARIES.md's worked example, for each shared rule on the tags path.
func TestEffectiveWorkedExample(t *testing.T) {
	defaults := `spec:
  eks:
    configuration:
      tags:
      - {key: tag-A, value: value-A}
      - {key: tag-B, value: value-B}
`
	tenant := specOf(t, `
eks:
  configuration:
    tags:
    - {key: tag-A, value: value-D}
    - {key: tag-C, value: value-C}
`)
	for _, tc := range []struct {
		rule string
		want []string // key=value in order
	}{
		{"merge", []string{"tag-A=value-A", "tag-B=value-B", "tag-C=value-C"}},
		{"mergeOverride", []string{"tag-A=value-D", "tag-B=value-B", "tag-C=value-C"}},
		{"replace", []string{"tag-A=value-D", "tag-C=value-C"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := mustParse(t, map[string]string{
				"boundaries": "shared:\n  " + tc.rule + ":\n  - spec.eks.configuration.tags\n",
				"defaults":   defaults,
			})
			res, err := c.Effective(Input{Spec: tenant})
			if err != nil {
				t.Fatal(err)
			}
			tags, _ := getPath(res.Spec, []string{"eks", "configuration", "tags"})
			var got []string
			for _, e := range tags.([]any) {
				m := e.(map[string]any)
				got = append(got, m["key"].(string)+"="+m["value"].(string))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tags = %v, want %v", got, tc.want)
			}
		})
	}
}

// effectiveCase runs one Config over one tenant spec.
type effectiveCase struct {
	name        string
	data        map[string]string
	tenant      string
	annotations map[string]string
	excluded    bool
	want        string     // the effective spec, YAML
	overrides   []Override // nil = none
	err         string     // substring of the expected error
}

func runEffectiveCases(t *testing.T, cases []effectiveCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.data)
			res, err := c.Effective(Input{Spec: specOf(t, tc.tenant), Annotations: tc.annotations, NamespaceExcluded: tc.excluded})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := specOf(t, tc.want)
			if want == nil {
				want = map[string]any{}
			}
			if d := diff(t, want, res.Spec); d != "" {
				t.Errorf("effective spec (-want +got):\n%s", d)
			}
			if d := diff(t, overridesAsJSON(tc.overrides), overridesAsJSON(res.Overrides)); d != "" {
				t.Errorf("overrides (-want +got):\n%s", d)
			}
		})
	}
}

func overridesAsJSON(os []Override) any {
	out := []any{}
	for _, o := range os {
		out = append(out, map[string]any{"path": o.Path, "submitted": o.Submitted, "enforced": o.Enforced})
	}
	return out
}

func TestEffectiveRules(t *testing.T) {
	restricted := map[string]string{
		"boundaries": "restricted: [spec.eks.configuration.image, spec.eks.configuration.keyPairName, spec.eks.configuration.subnets]",
		"defaults":   "spec: {eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}}",
	}
	runEffectiveCases(t, []effectiveCase{
		{
			name:   "restricted with default, tenant silent",
			data:   restricted,
			tenant: "eks: {minSize: 1}",
			want:   "eks: {minSize: 1, configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
		},
		{
			name:      "restricted with default, tenant differs: default enforced, override recorded",
			data:      restricted,
			tenant:    "eks: {configuration: {image: ami-evil, subnets: [subnet-9]}}",
			want:      "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
			overrides: []Override{{"spec.eks.configuration.image", "ami-evil", "ami-1234"}, {"spec.eks.configuration.subnets", []any{"subnet-9"}, []any{"subnet-1", "subnet-2"}}},
		},
		{
			name:   "restricted with default, tenant equal: no override",
			data:   restricted,
			tenant: "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
			want:   "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
		},
		{
			name:      "restricted list in another order is a different value",
			data:      restricted,
			tenant:    "eks: {configuration: {subnets: [subnet-2, subnet-1]}}",
			want:      "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
			overrides: []Override{{"spec.eks.configuration.subnets", []any{"subnet-2", "subnet-1"}, []any{"subnet-1", "subnet-2"}}},
		},
		{
			name:   "restricted with default, tenant's empty object: nothing to report",
			data:   map[string]string{"boundaries": "restricted: [spec.eks.configuration.labels]", "defaults": "spec: {eks: {configuration: {labels: {a: b}}}}"},
			tenant: "eks: {configuration: {labels: {}}}",
			want:   "eks: {configuration: {labels: {a: b}}}",
		},
		{
			name:      "restricted object: a tenant object that differs is reported whole",
			data:      map[string]string{"boundaries": "restricted: [spec.eks.configuration.labels]", "defaults": "spec: {eks: {configuration: {labels: {a: b}}}}"},
			tenant:    "eks: {configuration: {labels: {a: b, c: d}}}",
			want:      "eks: {configuration: {labels: {a: b}}}",
			overrides: []Override{{"spec.eks.configuration.labels", map[string]any{"a": "b", "c": "d"}, map[string]any{"a": "b"}}},
		},
		{
			name:      "restricted without default: the tenant value is removed and reported",
			data:      restricted,
			tenant:    "eks: {configuration: {keyPairName: mine}}",
			want:      "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
			overrides: []Override{{"spec.eks.configuration.keyPairName", "mine", nil}},
		},
		{
			name:   "tenant null counts as absent",
			data:   restricted,
			tenant: "eks: {configuration: {image: null, keyPairName: null, instanceType: null}}",
			want:   "eks: {configuration: {image: ami-1234, subnets: [subnet-1, subnet-2]}}",
		},
		{
			name:   "unnamed: tenant wins at leaves, lists atomic, defaults fill in",
			data:   map[string]string{"defaults": "spec: {provisioner: eks, eks: {minSize: 1, maxSize: 3, configuration: {suspendProcesses: [a, b], volSize: 20}}}"},
			tenant: "eks: {maxSize: 5, configuration: {suspendProcesses: [c]}}",
			want:   "provisioner: eks\neks: {minSize: 1, maxSize: 5, configuration: {suspendProcesses: [c], volSize: 20}}",
		},
		{
			name:   "unnamed: tenant value of another shape wins",
			data:   map[string]string{"defaults": "spec: {eks: {configuration: {labels: {a: b}}}}"},
			tenant: "eks: {configuration: {labels: [x]}}",
			want:   "eks: {configuration: {labels: [x]}}",
		},
		{
			name:   "replace: tenant's whole",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.strategy]}", "defaults": "spec: {strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 1}}}"},
			tenant: "strategy: {type: crd, crd: {crdName: rollingupgrades}}",
			want:   "strategy: {type: crd, crd: {crdName: rollingupgrades}}",
		},
		{
			name:   "replace: default when tenant silent",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.strategy]}", "defaults": "spec: {strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 1}}}"},
			tenant: "eks: {minSize: 1}",
			want:   "eks: {minSize: 1}\nstrategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 1}}",
		},
		{
			name:   "merge on a map: default wins the conflict",
			data:   map[string]string{"boundaries": "shared: {merge: [spec.eks.configuration.labels]}", "defaults": "spec: {eks: {configuration: {labels: {team: platform, tier: base}}}}"},
			tenant: "eks: {configuration: {labels: {team: mine, app: web}}}",
			want:   "eks: {configuration: {labels: {team: platform, tier: base, app: web}}}",
		},
		{
			name:   "mergeOverride on a map: tenant wins the conflict",
			data:   map[string]string{"boundaries": "shared: {mergeOverride: [spec.eks.configuration.labels]}", "defaults": "spec: {eks: {configuration: {labels: {team: platform, tier: base}}}}"},
			tenant: "eks: {configuration: {labels: {team: mine, app: web}}}",
			want:   "eks: {configuration: {labels: {team: mine, tier: base, app: web}}}",
		},
		{
			name:   "merge on a scalar: default wins",
			data:   map[string]string{"boundaries": "shared: {merge: [spec.eks.configuration.volSize]}", "defaults": "spec: {eks: {configuration: {volSize: 50}}}"},
			tenant: "eks: {configuration: {volSize: 80}}",
			want:   "eks: {configuration: {volSize: 50}}",
		},
		{
			name:   "mergeOverride on a scalar: tenant wins",
			data:   map[string]string{"boundaries": "shared: {mergeOverride: [spec.eks.configuration.volSize]}", "defaults": "spec: {eks: {configuration: {volSize: 50}}}"},
			tenant: "eks: {configuration: {volSize: 80}}",
			want:   "eks: {configuration: {volSize: 80}}",
		},
		{
			name:   "merge with only the tenant's value",
			data:   map[string]string{"boundaries": "shared: {merge: [spec.eks.configuration.labels]}"},
			tenant: "eks: {configuration: {labels: {app: web}}}",
			want:   "eks: {configuration: {labels: {app: web}}}",
		},
		{
			name:   "merge over a whole object: lists inside merge by their identity key",
			data:   map[string]string{"boundaries": "shared: {merge: [spec.eks.configuration]}", "defaults": "spec: {eks: {configuration: {image: ami-1, tags: [{key: a, value: '1'}], securityGroups: [sg-1]}}}"},
			tenant: "eks: {configuration: {image: ami-2, instanceType: m5.large, tags: [{key: a, value: '2'}, {key: b, value: '3'}], securityGroups: [sg-2, sg-1]}}",
			want:   "eks: {configuration: {image: ami-1, instanceType: m5.large, tags: [{key: a, value: '1'}, {key: b, value: '3'}], securityGroups: [sg-1, sg-2]}}",
		},
		{
			name: "merge: a value of another shape is an error naming the path",
			data: map[string]string{"boundaries": "shared: {merge: [spec.eks.configuration.labels]}", "defaults": "spec: {eks: {configuration: {labels: {a: b}}}}"},
			// labels is a map in the API; the tenant's list is only caught by the merge.
			tenant: "eks: {configuration: {labels: [x]}}",
			err:    "spec.eks.configuration.labels: cannot merge the submitted value (a list) with the default (an object)",
		},
		{
			name:   "restricted default cannot be placed inside a tenant scalar",
			data:   restricted,
			tenant: "eks: {configuration: oops}",
			err:    "spec.eks.configuration: is a string, but spec.eks.configuration.image must be set inside it",
		},
		{
			name:   "a path may reach below what exists",
			data:   map[string]string{"boundaries": "restricted: [spec.eks.configuration.mixedInstancesPolicy.strategy]\nshared: {merge: [spec.eks-fargate.tags]}"},
			tenant: "eks: {minSize: 1}",
			want:   "eks: {minSize: 1}",
		},
	})
}

func TestEffectiveNestedPaths(t *testing.T) {
	runEffectiveCases(t, []effectiveCase{
		{
			name: "replace outside, restricted inside: the tenant replaces the object but not the image",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration.image]\nshared: {replace: [spec.eks.configuration]}",
				"defaults":   "spec: {eks: {configuration: {image: ami-1234, volSize: 20, labels: {a: b}}}}",
			},
			tenant:    "eks: {configuration: {image: ami-evil, instanceType: m5.large}}",
			want:      "eks: {configuration: {image: ami-1234, instanceType: m5.large}}",
			overrides: []Override{{"spec.eks.configuration.image", "ami-evil", "ami-1234"}},
		},
		{
			name: "restricted outside, merge inside: the tenant adds labels to an admin-owned object",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration]\nshared: {merge: [spec.eks.configuration.labels]}",
				"defaults":   "spec: {eks: {configuration: {image: ami-1234, labels: {a: b}}}}",
			},
			tenant: "eks: {configuration: {labels: {c: d}}}",
			want:   "eks: {configuration: {image: ami-1234, labels: {a: b, c: d}}}",
			// The tenant's configuration differs from the default only under
			// labels, which the inner rule governs: no override.
		},
		{
			name: "restricted outside, merge inside: the override leaves the inner path out",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration]\nshared: {merge: [spec.eks.configuration.labels]}",
				"defaults":   "spec: {eks: {configuration: {image: ami-1234, labels: {a: b}}}}",
			},
			tenant:    "eks: {configuration: {image: ami-evil, labels: {c: d}}}",
			want:      "eks: {configuration: {image: ami-1234, labels: {a: b, c: d}}}",
			overrides: []Override{{"spec.eks.configuration", map[string]any{"image": "ami-evil"}, map[string]any{"image": "ami-1234"}}},
		},
		{
			name: "restricted outside and inside: inner default absent, tenant's inner value removed",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration, spec.eks.configuration.keyPairName]",
				"defaults":   "spec: {eks: {configuration: {image: ami-1234}}}",
			},
			tenant:    "eks: {configuration: {keyPairName: mine}}",
			want:      "eks: {configuration: {image: ami-1234}}",
			overrides: []Override{{"spec.eks.configuration.keyPairName", "mine", nil}},
		},
		{
			name: "three levels: each rule reads the tenant's and the default's own values",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration.mixedInstancesPolicy]\nshared: {replace: [spec.eks.configuration], merge: [spec.eks.configuration.mixedInstancesPolicy.instanceTypes]}",
				"defaults":   "spec: {eks: {configuration: {volSize: 20, mixedInstancesPolicy: {strategy: LowestPrice, instanceTypes: [{type: m5.large}]}}}}",
			},
			tenant:    "eks: {configuration: {instanceType: c5.large, mixedInstancesPolicy: {strategy: CapacityOptimized, instanceTypes: [{type: c5.large}]}}}",
			want:      "eks: {configuration: {instanceType: c5.large, mixedInstancesPolicy: {strategy: LowestPrice, instanceTypes: [{type: m5.large}, {type: c5.large}]}}}",
			overrides: []Override{{"spec.eks.configuration.mixedInstancesPolicy", map[string]any{"strategy": "CapacityOptimized"}, map[string]any{"strategy": "LowestPrice"}}},
		},
		{
			name: "merge outside, mergeOverride inside",
			data: map[string]string{
				"boundaries": "shared: {merge: [spec.eks.configuration], mergeOverride: [spec.eks.configuration.tags]}",
				"defaults":   "spec: {eks: {configuration: {volSize: 20, tags: [{key: a, value: '1'}]}}}",
			},
			tenant: "eks: {configuration: {volSize: 40, tags: [{key: a, value: '2'}]}}",
			want:   "eks: {configuration: {volSize: 20, tags: [{key: a, value: '2'}]}}",
		},
	})
}

func TestEffectiveConditionals(t *testing.T) {
	data := map[string]string{
		"boundaries": "restricted: [spec.eks.configuration.image]",
		"defaults":   "spec: {eks: {configuration: {image: ami-linux, volSize: 20, labels: {os: linux}}}}",
		"conditionals": `
- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows'
  defaults:
    spec:
      eks:
        configuration:
          image: ami-windows
          labels: {os: windows}
- annotationSelector: 'instancemgr.keikoproj.io/os-family in (windows, bottlerocket), big'
  defaults:
    spec:
      eks:
        configuration:
          image: ami-big
          volSize: 100
`,
	}
	windows := map[string]string{"instancemgr.keikoproj.io/os-family": "windows"}
	bigWindows := map[string]string{"instancemgr.keikoproj.io/os-family": "windows", "big": ""}
	runEffectiveCases(t, []effectiveCase{
		{name: "no annotations: defaults only", data: data, tenant: "", want: "eks: {configuration: {image: ami-linux, volSize: 20, labels: {os: linux}}}"},
		{name: "first matches", data: data, annotations: windows, want: "eks: {configuration: {image: ami-windows, volSize: 20, labels: {os: windows}}}"},
		{name: "both match: later wins at leaves", data: data, annotations: bigWindows, want: "eks: {configuration: {image: ami-big, volSize: 100, labels: {os: windows}}}"},
		{
			name: "restricted value from the conditional enforced", data: data, annotations: windows,
			tenant:    "eks: {configuration: {image: ami-linux}}",
			want:      "eks: {configuration: {image: ami-windows, volSize: 20, labels: {os: windows}}}",
			overrides: []Override{{"spec.eks.configuration.image", "ami-linux", "ami-windows"}},
		},
		{
			name:        "annotation with another value does not match",
			data:        data,
			annotations: map[string]string{"instancemgr.keikoproj.io/os-family": "bottlerocket"},
			want:        "eks: {configuration: {image: ami-linux, volSize: 20, labels: {os: linux}}}",
		},
		{
			name: "conditional lists are atomic",
			data: map[string]string{
				"defaults":     "spec: {eks: {configuration: {securityGroups: [sg-1, sg-2]}}}",
				"conditionals": "- annotationSelector: a=b\n  defaults: {spec: {eks: {configuration: {securityGroups: [sg-3]}}}}",
			},
			annotations: map[string]string{"a": "b"},
			want:        "eks: {configuration: {securityGroups: [sg-3]}}",
		},
	})
}

func TestEffectiveNamespaceExcludedAndNilConfig(t *testing.T) {
	tenant := specOf(t, "eks: {configuration: {image: ami-evil, tags: [{key: k, value: v}], labels: {a: b}}}\nprovisioner: eks")
	c := mustParse(t, exampleData)
	for name, cfg := range map[string]*Config{"excluded": c, "nil config": nil} {
		t.Run(name, func(t *testing.T) {
			res, err := cfg.Effective(Input{Spec: tenant, NamespaceExcluded: true})
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(t, tenant, res.Spec); d != "" {
				t.Errorf("effective != submitted (-want +got):\n%s", d)
			}
			if len(res.Overrides) != 0 {
				t.Errorf("overrides = %v, want none", res.Overrides)
			}
			if res.Hash != cfg.Hash(true) {
				t.Errorf("hash = %s, want %s", res.Hash, cfg.Hash(true))
			}
		})
	}
	res, err := (*Config)(nil).Effective(Input{Spec: tenant})
	if err != nil || diff(t, tenant, res.Spec) != "" {
		t.Errorf("nil config, not excluded: %v %v", err, res.Spec)
	}
	res, err = c.Effective(Input{})
	if err != nil || res.Spec == nil {
		t.Fatalf("nil spec: %v %v", err, res.Spec)
	}
	if got, _ := getPath(res.Spec, []string{"eks", "configuration", "image"}); got != "ami-1234" {
		t.Errorf("nil spec: image = %v, want the default", got)
	}
}

// The result shares no memory with the inputs: mutating it changes neither
// the Config nor the tenant's spec, and neither does computing it.
func TestEffectiveDoesNotAlias(t *testing.T) {
	c := mustParse(t, exampleData)
	tenant := specOf(t, tenantShortSpec+"    subnets: [subnet-x]\n    volumes: [{name: /dev/xvda, size: 40}]\n")
	tenantBefore := canon(t, tenant)
	defaultsBefore := canon(t, c.Defaults)
	res, err := c.Effective(Input{Spec: tenant})
	if err != nil {
		t.Fatal(err)
	}
	first := canon(t, res.Spec)
	scribble(res.Spec)
	for _, o := range res.Overrides {
		scribble(o.Submitted)
		scribble(o.Enforced)
	}
	if d := diff(t, tenantBefore, tenant); d != "" {
		t.Errorf("tenant spec changed (-before +after):\n%s", d)
	}
	if d := diff(t, defaultsBefore, c.Defaults); d != "" {
		t.Errorf("defaults changed (-before +after):\n%s", d)
	}
	again, err := c.Effective(Input{Spec: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(t, first, again.Spec); d != "" {
		t.Errorf("second result differs (-first +second):\n%s", d)
	}
}

// scribble overwrites every map entry and list element below v.
func scribble(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			scribble(e)
			if _, isObj := e.(map[string]any); !isObj {
				x[k] = "scribbled"
			}
		}
		x["scribbled"] = true
	case []any:
		for i, e := range x {
			scribble(e)
			if _, isObj := e.(map[string]any); !isObj {
				x[i] = "scribbled"
			}
		}
	}
}

// Inputs in other Go shapes (typed maps, ints, json.Number) behave like
// their JSON form.
func TestEffectiveNormalizesInput(t *testing.T) {
	c := mustParse(t, map[string]string{
		"boundaries": "restricted: [spec.eks.minSize, spec.eks.configuration.labels]",
		"defaults":   "spec: {eks: {minSize: 2, configuration: {labels: {a: b}}}}",
	})
	res, err := c.Effective(Input{Spec: map[string]any{"eks": map[string]any{
		"minSize":       json.Number("2"),
		"maxSize":       float64(4),
		"configuration": map[string]any{"labels": map[string]string{"a": "b"}, "volSize": int32(9)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Overrides) != 0 {
		t.Errorf("overrides = %v, want none: the values are equal", res.Overrides)
	}
	want := map[string]any{"eks": map[string]any{"minSize": int64(2), "maxSize": int64(4), "configuration": map[string]any{"labels": map[string]any{"a": "b"}, "volSize": int64(9)}}}
	if !reflect.DeepEqual(want, res.Spec) {
		t.Errorf("spec = %#v", res.Spec)
	}
	if _, err := c.Effective(Input{Spec: map[string]any{"eks": make(chan int)}}); err == nil || !strings.Contains(err.Error(), "spec.eks") {
		t.Errorf("a value with no JSON form: err = %v, want one naming spec.eks", err)
	}
}

func TestEffectiveHandBuiltConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		err  string
	}{
		{"path outside spec", Config{Restricted: []string{"metadata.labels"}}, `boundary path "metadata.labels" (restricted)`},
		{"bad selector", Config{Conditionals: []Conditional{{AnnotationSelector: "a in (", Defaults: map[string]any{"spec": map[string]any{}}}}}, "conditionals[0].annotationSelector"},
		{"defaults spec not an object", Config{Defaults: map[string]any{"spec": "x"}}, "defaults.spec: expected an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Effective(Input{})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
	// A hand-built Config without a parsed Selector parses AnnotationSelector.
	c := Config{Conditionals: []Conditional{{AnnotationSelector: "x=y", Defaults: map[string]any{"spec": map[string]any{"provisioner": "eks"}}}}}
	res, err := c.Effective(Input{Annotations: map[string]string{"x": "y"}})
	if err != nil || res.Spec["provisioner"] != "eks" {
		t.Errorf("hand-built conditional: %v %v", err, res.Spec)
	}
}

func TestOverrideString(t *testing.T) {
	o := Override{Path: "spec.eks.configuration.image", Submitted: "ami-0bad", Enforced: "ami-1234"}
	want := `spec.eks.configuration.image: "ami-0bad" replaced by "ami-1234" (restricted)`
	if o.String() != want {
		t.Errorf("got %s", o.String())
	}
}

// fuzzConfigs are the fixed configs FuzzEffective runs against: the seed's
// example, and one with nested rules of every kind, conditionals and deny.
var fuzzConfigs = []map[string]string{
	exampleData,
	{
		"boundaries": `restricted: [spec.eks.configuration, spec.eks.configuration.keyPairName, spec.provisioner, spec.eks-managed.configuration.tags]
shared:
  merge: [spec.eks.configuration.labels, spec.eks-fargate, spec.eks.configuration.mixedInstancesPolicy]
  mergeOverride: [spec.eks.configuration.tags, spec.eks.configuration.volumes, spec.eks.configuration.taints, spec.eks-managed]
  replace: [spec.strategy, spec.eks.configuration.userData, spec.eks-fargate.selectors]
`,
		"defaults": `spec:
  provisioner: eks
  strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 25%}}
  eks:
    minSize: 1
    configuration:
      image: ami-1
      labels: {a: "1", nested: "x"}
      tags: [{key: a, value: "1"}, {key: b, value: "2"}]
      volumes: [{name: /dev/xvda, size: 32}]
      taints: [{key: t, value: v, effect: NoSchedule}]
      userData: [{name: pre, stage: PreBootstrap, data: echo}]
      mixedInstancesPolicy: {strategy: LowestPrice, instanceTypes: [{type: m5.large, weight: 1}]}
  eks-managed: {configuration: {tags: [{key: m, value: "1"}], labels: {m: "1"}, instanceTypes: [m5.large]}}
  eks-fargate: {selectors: [{namespace: kube-system}], tags: {f: "1"}}
`,
		"conditionals": `- annotationSelector: os=windows
  defaults: {spec: {eks: {configuration: {image: ami-win, labels: {os: windows}}}}}
- annotationSelector: big
  defaults: {spec: {eks: {configuration: {volumes: [{name: /dev/xvda, size: 100}]}}}}
`,
		"enforcement": "deny",
	},
}

// FuzzEffective: any JSON spec and annotations, against fixed configs,
// never panic and give either an error naming a spec path, or a result
// that is JSON, enforces every restricted default, leaves its inputs alone,
// and is a fixed point: computing the effective spec of an effective spec
// gives it back unchanged, with no overrides.
func FuzzEffective(f *testing.F) {
	f.Add(tenantShortSpec, "", false, uint8(0))
	f.Add(`{"eks":{"configuration":{"image":"ami-evil","tags":[{"key":"a","value":"x"},{"key":"c"}],"labels":{"a":"2"}}}}`, "os=windows\nbig=", false, uint8(1))
	f.Add(`{"eks":{"configuration":{"volumes":[{"name":"/dev/xvda","size":1},{"name":"/dev/xvdb"}],"taints":[{"key":"t","effect":"NoExecute"}]}},"eks-fargate":{"selectors":[]}}`, "big=1", false, uint8(1))
	f.Add(`{"provisioner":"eks-managed","eks-managed":{"configuration":{"tags":[{"key":"m","value":"2"}],"instanceTypes":["c5.large",1,null]}}}`, "", false, uint8(1))
	f.Add(`{"eks":{"configuration":{"labels":[1,2]}}}`, "", false, uint8(0))
	f.Add(`{"eks":{"configuration":"oops"},"strategy":null}`, "", false, uint8(1))
	f.Add(`{"eks":{"configuration":{"image":"x"}}}`, "", true, uint8(0))
	f.Add(`{"eks":{"minSize":1e300,"maxSize":-0.5,"configuration":{"tags":[{"key":{"a":[]}},{"key":{"a":[]}}]}}}`, "os=windows", false, uint8(1))
	f.Fuzz(func(t *testing.T, specJSON, annotations string, excluded bool, which uint8) {
		var spec map[string]any
		if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
			return
		}
		ann := map[string]string{}
		for _, line := range strings.Split(annotations, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				ann[k] = v
			}
		}
		c, err := Parse(fuzzConfigs[int(which)%len(fuzzConfigs)])
		if err != nil {
			t.Fatal(err)
		}
		hash := c.Hash(excluded)
		in := Input{Spec: spec, Annotations: ann, NamespaceExcluded: excluded}
		before := mustJSON(t, spec)

		res, err := c.Effective(in)
		if string(mustJSON(t, spec)) != string(before) {
			t.Fatalf("Effective modified its input")
		}
		if err != nil {
			if excluded || !strings.HasPrefix(err.Error(), "spec.") {
				t.Fatalf("error does not name a spec path: %v", err)
			}
			return
		}
		out, err := json.Marshal(res.Spec)
		if err != nil {
			t.Fatalf("result is not JSON: %v", err)
		}
		if res.Hash != hash || c.Hash(excluded) != hash {
			t.Fatalf("hash mismatch or config modified")
		}
		if excluded {
			if diff(t, spec, res.Spec) != "" || len(res.Overrides) != 0 {
				t.Fatalf("excluded namespace: effective != submitted")
			}
			return
		}

		d, err := c.defaultsFor(ann)
		if err != nil {
			t.Fatal(err)
		}
		restricted := map[string]bool{}
		rules, err := c.rules()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if r.kind == ruleRestricted {
				restricted[r.path] = true
			}
		}
		for _, p := range c.Restricted {
			restricted[p] = true
			dv, ok := getPath(d, splitPath(p)[1:])
			if !ok || hasInnerPath(c, p) {
				continue
			}
			if got, _ := getPath(res.Spec, splitPath(p)[1:]); !equalValues(got, dv) {
				t.Fatalf("%s = %v, want the default %v", p, got, dv)
			}
		}
		for i, o := range res.Overrides {
			if !restricted[o.Path] || equalValues(o.Submitted, o.Enforced) || (i > 0 && res.Overrides[i-1].Path >= o.Path) {
				t.Fatalf("bad override list: %v", res.Overrides)
			}
		}

		again, err := c.Effective(Input{Spec: res.Spec, Annotations: ann})
		if err != nil {
			t.Fatalf("effective spec of the effective spec: %v", err)
		}
		if d := diff(t, res.Spec, again.Spec); d != "" {
			t.Fatalf("not a fixed point (-once +twice):\n%s", d)
		}
		if len(again.Overrides) != 0 {
			t.Fatalf("overrides on the effective spec: %v", again.Overrides)
		}

		scribble(res.Spec)
		third, err := c.Effective(in)
		if err != nil || string(mustJSON(t, third.Spec)) != string(out) {
			t.Fatalf("the result shared memory with the inputs or the config")
		}
	})
}

func hasInnerPath(c *Config, p string) bool {
	for _, l := range [][]string{c.Restricted, c.Merge, c.MergeOverride, c.Replace} {
		for _, q := range l {
			if strings.HasPrefix(q, p+".") {
				return true
			}
		}
	}
	return false
}

func BenchmarkEffective(b *testing.B) {
	c := mustParse(b, exampleData)
	spec := specOf(b, tenantShortSpec)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Effective(Input{Spec: spec}); err != nil {
			b.Fatal(err)
		}
	}
}
