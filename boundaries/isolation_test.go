package boundaries

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestNodeIsolation(t *testing.T) {
	on := map[string]string{KeyNodeIsolation: "perNamespace", "boundaries": "shared: {replace: [spec.eks.configuration.taints]}"}
	for _, tc := range []struct {
		name   string
		data   map[string]string
		in     Input
		tenant string
		want   string // effective spec, YAML
		err    string
	}{
		{"off by default: nothing added", map[string]string{}, Input{Namespace: "team-a"},
			"eks: {configuration: {instanceType: m5.large}}", "eks: {configuration: {instanceType: m5.large}}", ""},
		{"each node section gets its namespace's taint", on, Input{Namespace: "team-a"},
			"eks: {configuration: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}}\neks-managed: {minSize: 1}",
			"eks: {configuration: {taints: [{key: dedicated, value: x, effect: NoSchedule}, {key: instancemgr.keikoproj.io/namespace, value: team-a, effect: NoExecute}]}}\neks-managed: {minSize: 1, configuration: {taints: [{key: instancemgr.keikoproj.io/namespace, value: team-a, effect: NoExecute}]}}", ""},
		{"another namespace's taint is replaced, not worn", on, Input{Namespace: "team-a"},
			"eks: {configuration: {taints: [{key: instancemgr.keikoproj.io/namespace, value: team-b, effect: NoExecute}]}}",
			"eks: {configuration: {taints: [{key: instancemgr.keikoproj.io/namespace, value: team-a, effect: NoExecute}]}}", ""},
		{"the NoSchedule taint of earlier releases is replaced (N24)", on, Input{Namespace: "team-a"},
			"eks: {configuration: {taints: [{key: instancemgr.keikoproj.io/namespace, value: team-a, effect: NoSchedule}]}}",
			"eks: {configuration: {taints: [{key: instancemgr.keikoproj.io/namespace, value: team-a, effect: NoExecute}]}}", ""},
		{"fargate gets nothing", on, Input{Namespace: "team-a"},
			"provisioner: eks-fargate\neks-fargate: {selectors: [{namespace: team-a}]}", "provisioner: eks-fargate\neks-fargate: {selectors: [{namespace: team-a}]}", ""},
		{"the admin namespace is not isolated", on, Input{Namespace: "instance-manager", AdminNamespace: true},
			"eks: {configuration: {instanceType: m5.large}}", "eks: {configuration: {instanceType: m5.large}}", ""},
		{"an excluded namespace is not isolated", on, Input{Namespace: "team-x", NamespaceExcluded: true},
			"eks: {configuration: {instanceType: m5.large}}", "eks: {configuration: {instanceType: m5.large}}", ""},
		{"no namespace: an error", on, Input{}, "eks: {configuration: {instanceType: m5.large}}", "", "namespace is not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.data)
			in := tc.in
			if err := yaml.Unmarshal([]byte(tc.tenant), &in.Spec); err != nil {
				t.Fatal(err)
			}
			res, err := c.Effective(in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := yaml.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			wantN, _ := normalizeObject(want, "spec")
			if !equalValues(res.Spec, wantN) {
				got, _ := yaml.Marshal(res.Spec)
				t.Fatalf("effective spec\n%s\nwant\n%s", got, tc.want)
			}
			// Verify accepts what Effective gave, and names a removed taint
			// and one whose effect is NoSchedule (which spec.nodeName
			// bypasses, N24).
			if probs, err := c.Verify(in, res.Spec); err != nil || len(probs) != 0 {
				t.Fatalf("Verify of the effective spec: %v %v", probs, err)
			}
			if c.NodeIsolation && !in.AdminNamespace && !in.NamespaceExcluded {
				if _, ok := res.Spec["eks"]; ok {
					stripped := deepCopy(res.Spec).(map[string]any)
					deletePath(stripped, []string{"eks", "configuration", "taints"})
					if probs, _ := c.Verify(in, stripped); len(probs) == 0 || !strings.Contains(strings.Join(probs, "; "), "lacks the node isolation taint") {
						t.Fatalf("Verify of a spec without the taint: %v", probs)
					}
					weak := deepCopy(res.Spec).(map[string]any)
					taints, _ := getPath(weak, []string{"eks", "configuration", "taints"})
					for _, tt := range asList(taints) {
						if m := tt.(map[string]any); m["key"] == IsolationTaintKey {
							m["effect"] = "NoSchedule"
						}
					}
					want := "spec.eks.configuration.taints lacks the node isolation taint " + IsolationTaintKey + "=" + in.Namespace + ":NoExecute"
					if probs, _ := c.Verify(in, weak); !strings.Contains(strings.Join(probs, "; "), want) {
						t.Fatalf("Verify of a spec with a NoSchedule isolation taint: %v, want %q", probs, want)
					}
				}
			}
		})
	}
	if _, err := Parse(map[string]string{KeyNodeIsolation: "perTeam"}); err == nil || !strings.Contains(err.Error(), `data.nodeIsolation: "perTeam" is not a node isolation mode (valid: perNamespace, none)`) {
		t.Errorf("bad mode: %v", err)
	}
	a, b := mustParse(t, on), mustParse(t, map[string]string{"boundaries": on["boundaries"]})
	if a.Hash(false) == b.Hash(false) {
		t.Error("turning node isolation on does not change the boundaries hash (groups would not be re-admitted)")
	}
}
