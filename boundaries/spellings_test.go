package boundaries

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestNormalizeSpellings(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"strategy type", `{"strategy":{"type":"rollingupdate"}}`, `{"strategy":{"type":"rollingUpdate"}}`},
		{"strategy type already canonical", `{"strategy":{"type":"rollingUpdate"}}`, `{"strategy":{"type":"rollingUpdate"}}`},
		{"lifecycle hooks", `{"eks":{"configuration":{"lifecycleHooks":[{"name":"a","lifecycle":"Launch","defaultResult":"CONTINUE"},{"name":"b","lifecycle":"TERMINATE","defaultResult":"continue"}]}}}`,
			`{"eks":{"configuration":{"lifecycleHooks":[{"name":"a","lifecycle":"launch","defaultResult":"continue"},{"name":"b","lifecycle":"terminate","defaultResult":"continue"}]}}}`},
		{"spot allocation with dashes", `{"eks":{"configuration":{"mixedInstancesPolicy":{"strategy":"capacity-optimized"}}}}`, `{"eks":{"configuration":{"mixedInstancesPolicy":{"strategy":"CapacityOptimized"}}}}`},
		{"spot allocation lower case", `{"eks":{"configuration":{"mixedInstancesPolicy":{"strategy":"lowestprice"}}}}`, `{"eks":{"configuration":{"mixedInstancesPolicy":{"strategy":"LowestPrice"}}}}`},
		{"lists of scalars", `{"eks":{"configuration":{"suspendProcesses":["azrebalance","all"],"metricsCollection":["groupminsize"]}}}`,
			`{"eks":{"configuration":{"suspendProcesses":["AZRebalance","All"],"metricsCollection":["GroupMinSize"]}}}`},
		{"volumes and stages", `{"eks":{"configuration":{"volumes":[{"name":"/dev/xvda","type":"GP3","mountOptions":{"fileSystem":"XFS"}}],"userData":[{"stage":"prebootstrap"}]}}}`,
			`{"eks":{"configuration":{"volumes":[{"name":"/dev/xvda","type":"gp3","mountOptions":{"fileSystem":"xfs"}}],"userData":[{"stage":"PreBootstrap"}]}}}`},
		{"managed capacity type", `{"eks-managed":{"configuration":{"capacityType":"on-demand"}}}`, `{"eks-managed":{"configuration":{"capacityType":"ON_DEMAND"}}}`},
		{"unknown value left for validation", `{"strategy":{"type":"randomUpdate"}}`, `{"strategy":{"type":"randomUpdate"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in, want map[string]any
			if err := json.Unmarshal([]byte(c.in), &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			NormalizeSpellings(in)
			if !reflect.DeepEqual(in, want) {
				got, _ := json.Marshal(in)
				t.Fatalf("normalised %s, want %s", got, c.want)
			}
		})
	}
}

func TestValidateSpellings(t *testing.T) {
	var spec map[string]any
	_ = json.Unmarshal([]byte(`{"strategy":{"type":"randomUpdate"},"eks":{"configuration":{"lifecycleHooks":[{"lifecycle":"launch"},{"lifecycle":"boot"}]}}}`), &spec)
	errs := CheckSpellings(spec)
	if len(errs) != 2 || errs[0].Field != "spec.strategy.type" || errs[1].Field != "spec.eks.configuration.lifecycleHooks[1].lifecycle" ||
		!strings.Contains(errs[0].Error(), "rollingUpdate") {
		t.Fatalf("errors %v, want strategy.type and lifecycleHooks[1].lifecycle refused naming the allowed values", errs)
	}
}

func TestRestrictedDefaultsInUpstreamSpellingsVerify(t *testing.T) {
	cfg, err := Parse(map[string]string{
		"boundaries": "restricted:\n- spec.strategy\n",
		"defaults":   "spec:\n  strategy:\n    type: rollingupdate\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]any{"strategy": map[string]any{"type": "rollingUpdate"}}
	in := Input{Spec: map[string]any{}}
	if probs, _ := cfg.Verify(in, final); len(probs) == 0 {
		t.Fatal("the raw ConfigMap should differ from the canonical spec (else this test proves nothing)")
	}
	if probs, err := spelledCanonically(cfg).Verify(in, final); err != nil || len(probs) != 0 {
		t.Fatalf("Verify with canonical defaults: %v %v", probs, err)
	}
	if cfg.Defaults["spec"].(map[string]any)["strategy"].(map[string]any)["type"] != "rollingupdate" {
		t.Error("spelledCanonically changed the stored ConfigMap")
	}
}

// Every value of the enum table folds to its own key, so that no spelling
// is ambiguous, and the Auto Scaling lists are sorted, as the validating
// webhook's messages list them.
func TestEnumTable(t *testing.T) {
	for _, f := range v1alpha1.EnumFields {
		seen := map[string]string{}
		for _, v := range f.Values {
			if prev, ok := seen[fold(v)]; ok {
				t.Errorf("%s: %q and %q fold alike", f.Path, prev, v)
			}
			seen[fold(v)] = v
		}
	}
	for name, list := range map[string][]string{"AutoScalingMetrics": v1alpha1.AutoScalingMetrics, "AutoScalingProcesses": v1alpha1.AutoScalingProcesses} {
		if !slices.IsSorted(list) {
			t.Errorf("v1alpha1.%s is not sorted", name)
		}
	}
}
