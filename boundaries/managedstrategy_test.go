package boundaries

import (
	"encoding/json"
	"testing"
)

// Attack 19 (review 2026-11-26 N13): a strategy default written for eks
// does not apply to a managed provisioner's group.
func TestManagedProvisionersKeepTheManagedStrategy(t *testing.T) {
	restricted := map[string]string{
		"boundaries": "restricted: [spec.strategy]",
		"defaults":   "spec: {provisioner: eks, strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 1}}}",
	}
	shared := map[string]string{
		"boundaries": "shared: {replace: [spec.strategy]}",
		"defaults":   restricted["defaults"],
	}
	rolling := map[string]any{"type": "rollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": float64(1)}}
	managed := map[string]any{"type": "managed"}
	for _, tc := range []struct {
		name      string
		data      map[string]string
		submitted map[string]any
		want      any // the effective spec.strategy
		overrides int
	}{
		{"restricted, eks-managed asking for managed", restricted, map[string]any{"provisioner": "eks-managed", "strategy": managed}, managed, 0},
		{"restricted, eks-fargate asking for nothing", restricted, map[string]any{"provisioner": "eks-fargate"}, managed, 0},
		{"restricted, eks-managed asking for crd", restricted, map[string]any{"provisioner": "eks-managed", "strategy": map[string]any{"type": "crd"}}, rolling, 1},
		{"restricted, eks keeps the default", restricted, map[string]any{"provisioner": "eks", "strategy": managed}, rolling, 1},
		{"shared, eks-managed asking for nothing", shared, map[string]any{"provisioner": "eks-managed"}, managed, 0},
		{"shared, eks asking for nothing", shared, map[string]any{}, rolling, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := mustParse(t, tc.data).Effective(Input{Spec: tc.submitted, Namespace: "team-a"})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res.Spec["strategy"])
			if want, _ := json.Marshal(tc.want); string(got) != string(want) {
				t.Errorf("strategy = %s, want %s", got, want)
			}
			if len(res.Overrides) != tc.overrides {
				t.Errorf("overrides = %+v, want %d", res.Overrides, tc.overrides)
			}
		})
	}
}
