package boundaries

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRolloutTenants(t *testing.T) {
	for _, tc := range []struct {
		name, tenants string
		want          TenantChoices
	}{
		{"off by default", "", TenantChoices{}},
		{"approve", "tenants: {approve: true}\n", TenantChoices{Approve: true}},
		{"defer", "tenants: {deferUpTo: 72h}\n", TenantChoices{DeferUpTo: 72 * time.Hour}},
		{"both", "tenants: {approve: true, deferUpTo: 90m}\n", TenantChoices{Approve: true, DeferUpTo: 90 * time.Minute}},
		{"written off", "tenants: {approve: false, deferUpTo: 0}\n", TenantChoices{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, map[string]string{"rollout": tc.tenants + "waves:\n- {name: canary, namespaces: [c]}\n"})
			if c.Rollout.Tenants != tc.want {
				t.Errorf("tenants = %+v, want %+v", c.Rollout.Tenants, tc.want)
			}
		})
	}
}

func TestParseRolloutTenantsRejects(t *testing.T) {
	waves := "waves:\n- {name: a}\n"
	for _, tc := range []struct{ name, rollout, want string }{
		{"without waves", "maxConcurrentUpgrades: 2\ntenants: {approve: true}", "data.rollout.tenants: has no effect without waves"},
		{"empty", "tenants: {}\n" + waves, "data.rollout.tenants: empty: set approve: true"},
		{"not an object", "tenants: yes\n" + waves, "data.rollout.tenants: expected an object with approve (true or false) and/or deferUpTo"},
		{"unknown field", "tenants: {defer: 1h}\n" + waves, `data.rollout.tenants: unknown field "defer" (valid: approve, deferUpTo)`},
		{"approve not a bool", "tenants: {approve: 'yes'}\n" + waves, "data.rollout.tenants.approve: expected true or false, got a string"},
		{"defer without unit", "tenants: {deferUpTo: 72}\n" + waves, "data.rollout.tenants.deferUpTo: 72 has no unit"},
		{"defer too long", "tenants: {deferUpTo: 1000h}\n" + waves, "data.rollout.tenants.deferUpTo: 1000h0m0s is out of range (valid: a duration up to 720h0m0s, or 0 for no deferral)"},
		{"defer negative", "tenants: {deferUpTo: -1h}\n" + waves, `data.rollout.tenants.deferUpTo: "-1h" is out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(map[string]string{"rollout": tc.rollout})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse = %v, want a *ConfigError", err)
			}
			for _, p := range ce.Problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("problems:\n%s\nwant one containing %q", strings.Join(ce.Problems, "\n"), tc.want)
		})
	}
}

func TestRolloutPolicyAllows(t *testing.T) {
	both := &RolloutPolicy{Tenants: TenantChoices{Approve: true, DeferUpTo: time.Hour}}
	approve := &RolloutPolicy{Tenants: TenantChoices{Approve: true}}
	none := &RolloutPolicy{}
	for _, tc := range []struct {
		name   string
		p      *RolloutPolicy
		value  string
		ok     bool
		reason string
	}{
		{"approve allowed", both, "approve", true, ""},
		{"defer allowed", both, "defer", true, ""},
		{"defer not allowed", approve, "defer", false, `"defer" is not allowed by the boundary ConfigMap's rollout.tenants (valid: approve only)`},
		{"nothing allowed", none, "approve", false, "valid: none: the admin allows tenants no rollout choice"},
		{"no policy", nil, "approve", false, "the boundary ConfigMap has no rollout waves"},
		{"unknown value", both, "now", false, `"now" is not a rollout choice (valid: approve, or defer for up to 1h0m0s after the group's wave started)`},
		{"empty value", both, "", false, `"" is not a rollout choice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.p.Allows(tc.value)
			if ok != tc.ok || !strings.Contains(why, tc.reason) {
				t.Errorf("Allows(%q) = %v, %q; want %v, %q", tc.value, ok, why, tc.ok, tc.reason)
			}
		})
	}
}
