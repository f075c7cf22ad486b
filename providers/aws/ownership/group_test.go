package ownership

import (
	"regexp"
	"testing"
)

func TestEKSName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	cases := []struct {
		name  string
		n     int
		parts []string
		want  string // "" = only check shape and length
	}{
		{"fits as is", 63, []string{"prod", "team-a", "web"}, "prod-team-a-web"},
		{"a dot is replaced and hashed", 63, []string{"prod", "team-a", "web.v2"}, ""},
		{"too long is cut and hashed", 20, []string{"a-very-long-cluster", "namespace", "name"}, ""},
		{"leading dash", 63, []string{"-x"}, ""},
	}
	seen := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EKSName(tc.n, tc.parts...)
			if len(got) > tc.n || !valid.MatchString(got) || (tc.want != "" && got != tc.want) {
				t.Fatalf("EKSName(%d, %q) = %q", tc.n, tc.parts, got)
			}
			if prev, ok := seen[got]; ok {
				t.Fatalf("%q and %q both give %q", prev, tc.name, got)
			}
			seen[got] = tc.name
		})
	}
	if EKSName(63, "prod", "team-a", "web.v2") == EKSName(63, "prod", "team-a", "web-v2") {
		t.Error("names differing by '.' and '-' collide")
	}
}
