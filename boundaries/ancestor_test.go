package boundaries

import (
	"strings"
	"testing"
)

func TestAncestorSharings(t *testing.T) {
	for _, tc := range []struct {
		name, boundaries string
		want             []string // what the sharings must say: rules and paths
	}{
		{"a sensitive path named", "shared: {replace: [spec.eks.configuration.userData]}", nil},
		{"an ancestor restricted", "restricted: [spec.eks.configuration]", nil},
		{"nothing sensitive below", "shared: {merge: [spec.eks.configuration.labels]}", nil},
		{"attack 16: the configuration merged", "shared: {merge: [spec.eks.configuration]}",
			[]string{"shared.merge spec.eks.configuration shares", "spec.eks.configuration.userData", "spec.eks.configuration.metadataOptions", "spec.eks.configuration.placement", "spec.eks.configuration.lifecycleHooks"}},
		{"each sensitive path named", "shared: {merge: [spec.eks.configuration]}\nrestricted: [" + strings.Join(sensitiveUnder("spec.eks.configuration", "spec.eks-managed.configuration"), ", ") + "]", nil},
		{"the equivalent section of another provisioner", "shared: {replace: [spec.eks.configuration]}\nrestricted: [" + strings.Join(sensitiveUnder("spec.eks.configuration"), ", ") + "]",
			[]string{"shared.replace spec.eks-managed.configuration (implied by", "spec.eks-managed.configuration.nodeRole"}},
		{"a provisioner's whole section", "shared: {replace: [spec.eks]}", []string{"shared.replace spec.eks shares", "spec.eks.configuration.userData",
			"shared.replace spec.eks-fargate (implied by", "spec.eks-fargate.podExecutionRoleArn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, map[string]string{"boundaries": tc.boundaries})
			got := c.AncestorSharings()
			if tc.want == nil {
				if len(got) != 0 {
					t.Errorf("AncestorSharings = %v, want none", got)
				}
				return
			}
			var all []string
			for _, a := range got {
				all = append(all, a.String())
			}
			joined := strings.Join(all, "; ")
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("%q does not contain %q", joined, w)
				}
			}
		})
	}
}

// sensitiveUnder lists the sensitive paths below the given prefixes.
func sensitiveUnder(prefixes ...string) []string {
	var out []string
	for _, s := range SensitivePaths {
		for _, p := range prefixes {
			if strings.HasPrefix(s, p+".") {
				out = append(out, s)
			}
		}
	}
	return out
}
