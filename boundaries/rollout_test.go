package boundaries

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseRolloutPolicy(t *testing.T) {
	c := mustParse(t, map[string]string{"rollout": `
maxConcurrentUpgrades: 3
soak: 2m
failure:
  startupTimeout: 90s
  maxUnhealthyPercent: 25
waves:
- name: canary
  namespaces: [team-canary]
  soak: 10m
- selector: 'tier in (web, batch)'
- name: early
  percent: 25
`})
	if c.MaxConcurrentUpgrades != 3 {
		t.Errorf("maxConcurrentUpgrades = %d", c.MaxConcurrentUpgrades)
	}
	p := c.Rollout
	if p == nil {
		t.Fatal("no rollout policy")
	}
	if p.Failure != (FailureCriteria{GroupError: true, StartupTimeout: 90 * time.Second, MaxUnhealthyPercent: 25}) {
		t.Errorf("failure = %+v", p.Failure)
	}
	var got []string
	for _, w := range p.Waves {
		got = append(got, w.Name+" "+w.Describe()+" soak "+w.Soak.String())
	}
	want := []string{
		"canary namespaces [team-canary] soak 10m0s",
		`wave-2 selector "tier in (web, batch)" soak 2m0s`,
		"early 25% of the rest soak 2m0s",
		"rest the rest soak 2m0s", // implicit: the last wave written selects some groups only
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("waves:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !p.Waves[1].Matches("any", map[string]string{"tier": "web"}) || p.Waves[1].Matches("any", map[string]string{"tier": "db"}) {
		t.Error("wave-2's selector does not match the groups' labels")
	}
	if !p.Waves[0].Matches("team-canary", nil) || p.Waves[0].Matches("team-b", nil) {
		t.Error("canary's namespaces do not match")
	}
}

func TestParseRolloutDefaults(t *testing.T) {
	c := mustParse(t, map[string]string{"rollout": "waves:\n- {name: canary, selector: rollout=canary}\n- {name: all}\n"})
	p := c.Rollout
	if p == nil || len(p.Waves) != 2 || !p.Waves[1].TakesRest() {
		t.Fatalf("policy = %+v; want canary and all, the last taking the rest (no implicit wave)", p)
	}
	if p.Waves[0].Soak != DefaultSoak || p.Failure != (FailureCriteria{GroupError: true, StartupTimeout: DefaultStartupTimeout, MaxUnhealthyPercent: DefaultMaxUnhealthyPercent}) {
		t.Errorf("defaults: soak %s, failure %+v", p.Waves[0].Soak, p.Failure)
	}
	if c.MaxConcurrentUpgrades != 0 {
		t.Errorf("maxConcurrentUpgrades = %d, want unset", c.MaxConcurrentUpgrades)
	}
	// No policy: today's fan-out.
	if c := mustParse(t, map[string]string{"rollout": "maxConcurrentUpgrades: 2"}); c.Rollout != nil {
		t.Errorf("a rollout without waves has a policy: %+v", c.Rollout)
	}
}

func TestParseRolloutRejects(t *testing.T) {
	for _, tc := range []struct{ name, rollout, want string }{
		{"waves not a list", "waves: canary", "data.rollout.waves: expected a list of waves"},
		{"no waves", "waves: []", "data.rollout.waves: empty: list at least one wave"},
		{"soak without waves", "maxConcurrentUpgrades: 2\nsoak: 5m", "data.rollout.soak: has no effect without waves"},
		{"failure without waves", "failure: {groupError: false}", "data.rollout.failure: has no effect without waves"},
		{"bad approval", "waves:\n- {name: a, namespaces: [x], approval: yes}", "data.rollout.waves[0].approval: true is not an approval (valid: manual"},
		{"unknown wave field", "waves:\n- {name: a, labels: x}", `data.rollout.waves[0]: unknown field "labels" (valid: name, selector, namespaces, percent, soak, approval)`},
		{"bad selector", "waves:\n- {selector: 'a in b'}", `data.rollout.waves[0].selector: invalid selector "a in b"`},
		{"empty selector", "waves:\n- {selector: ''}", "data.rollout.waves[0].selector: empty"},
		{"bad namespace", "waves:\n- {namespaces: [Team_A]}", `data.rollout.waves[0].namespaces[0]: "Team_A" is not a namespace name`},
		{"empty namespaces", "waves:\n- {namespaces: []}", "data.rollout.waves[0].namespaces: expected a non-empty list of namespace names, got an empty list"},
		{"percent zero", "waves:\n- {percent: 0}", "data.rollout.waves[0].percent: 0 is out of range (valid: an integer from 1 to 100)"},
		{"percent string", "waves:\n- {percent: 10%}", "data.rollout.waves[0].percent: expected an integer from 1 to 100, got a string"},
		{"percent and selector", "waves:\n- {percent: 10, selector: a=b}", "data.rollout.waves[0]: selects by percent and by selector"},
		{"rest before the end", "waves:\n- {name: all}\n- {name: late, percent: 5}", "data.rollout.waves[0]: selects neither by selector, namespaces nor percent"},
		{"duplicate names", "waves:\n- {name: a, percent: 5}\n- {name: a}", `data.rollout.waves[1].name: "a" is the name of wave 0 already`},
		{"bad name", "waves:\n- {name: Canary!, percent: 5}", `data.rollout.waves[0].name: "Canary!" is not a valid wave name`},
		{"rest name taken", "waves:\n- {name: rest, percent: 5}", `an implicit wave "rest" takes the rest; the name "rest" is taken`},
		{"soak without unit", "waves:\n- {name: a, soak: 30}", "data.rollout.waves[0].soak: 30 has no unit (valid: a duration such as 30s, 10m or 1h, or 0 for none)"},
		{"soak negative", "soak: -1m\nwaves:\n- {name: a}", `data.rollout.soak: "-1m" is out of range`},
		{"soak words", "soak: ten minutes\nwaves:\n- {name: a}", `data.rollout.soak: "ten minutes" is not a duration`},
		{"startup timeout zero", "failure: {startupTimeout: 0s}\nwaves:\n- {name: a}", `data.rollout.failure.startupTimeout: "0s" is out of range (valid: a duration such as 30s, 10m or 1h)`},
		{"unhealthy out of range", "failure: {maxUnhealthyPercent: 101}\nwaves:\n- {name: a}", "data.rollout.failure.maxUnhealthyPercent: 101 is out of range (valid: an integer from 0 to 100)"},
		{"groupError not a bool", "failure: {groupError: 'yes'}\nwaves:\n- {name: a}", "data.rollout.failure.groupError: expected true or false, got a string"},
		{"unknown failure field", "failure: {errors: true}\nwaves:\n- {name: a}", `data.rollout.failure: unknown field "errors" (valid: groupError, startupTimeout, maxUnhealthyPercent, podNotReadyAfter, maxContainerRestarts)`},
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

func TestRevision(t *testing.T) {
	base := map[string]string{"defaults": "spec:\n  provisioner: eks\n", "boundaries": "restricted: [spec.eks.configuration.image]\n"}
	r := Revision(base)
	if len(r) != 10 {
		t.Fatalf("revision %q: want 10 hex digits", r)
	}
	same := map[string]string{"boundaries": base["boundaries"], "defaults": base["defaults"], "rollout": "waves: [{name: a}]", "enforcement": "  "}
	if Revision(same) != r {
		t.Error("the rollout key or a blank value changed the revision")
	}
	other := map[string]string{"defaults": "spec:\n  provisioner: eks-managed\n", "boundaries": base["boundaries"]}
	if Revision(other) == r {
		t.Error("different defaults, same revision")
	}
}

func TestWaveLabelKeys(t *testing.T) {
	c := mustParse(t, map[string]string{"rollout": `
waves:
- {name: canary, selector: 'rollout=canary,!legacy'}
- {name: web, namespaces: [team-web], selector: 'tier in (web)'}
- {name: early, selector: 'rollout=early'}
- {name: pct, percent: 25}
`})
	for _, tc := range []struct {
		namespace string
		want      map[string][]string
	}{
		{"team-web", map[string][]string{"rollout": {"canary", "early"}, "legacy": {"canary"}, "tier": {"web"}}},
		{"team-b", map[string][]string{"rollout": {"canary", "early"}, "legacy": {"canary"}}}, // web cannot take team-b's groups
	} {
		got := c.Rollout.WaveLabelKeys(tc.namespace)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("WaveLabelKeys(%s) = %v, want %v", tc.namespace, got, tc.want)
		}
	}
	if got := mustParse(t, map[string]string{"rollout": "waves:\n- {name: canary, namespaces: [team-canary]}\n- {name: all}\n"}).Rollout.WaveLabelKeys("team-canary"); got != nil {
		t.Errorf("waves by namespaces only: keys %v, want none", got)
	}
	var none *RolloutPolicy
	if none.WaveLabelKeys("x") != nil {
		t.Error("a nil policy has keys")
	}
}
