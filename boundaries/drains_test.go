package boundaries

import (
	"strings"
	"testing"
	"time"
)

// data.drains: a cluster deadline, narrowed per namespace; refused with a
// message naming the field and what is valid; absent means no deadline;
// and it names no revision (a new deadline rolls nothing out).
func TestDrainDeadline(t *testing.T) {
	cases := []struct {
		name    string
		drains  string
		want    map[string]time.Duration // namespace -> DrainDeadline
		problem string
	}{
		{name: "absent: no deadline", want: map[string]time.Duration{"team-a": 0, "": 0}},
		{name: "cluster-wide", drains: "deadline: 2h", want: map[string]time.Duration{"team-a": 2 * time.Hour, "": 2 * time.Hour}},
		{name: "narrowed for a namespace", drains: "deadline: 2h\nnamespaces: {team-a: 30m}",
			want: map[string]time.Duration{"team-a": 30 * time.Minute, "team-b": 2 * time.Hour}},
		{name: "a namespace only", drains: "namespaces: {team-a: 15m}", want: map[string]time.Duration{"team-a": 15 * time.Minute, "team-b": 0}},
		{name: "a namespace may not extend the cluster's", drains: "deadline: 1h\nnamespaces: {team-a: 3h}",
			problem: "data.drains.namespaces.team-a: 3h0m0s is longer than the cluster's deadline 1h0m0s; a namespace's deadline may only narrow it (at most 1h0m0s)"},
		{name: "not a duration", drains: "deadline: soon",
			problem: `data.drains.deadline: "soon" is not a duration (valid: a Go duration of at least 1m0s, such as 30m or 2h)`},
		{name: "too short", drains: "deadline: 10s", problem: "data.drains.deadline: 10s is shorter than 1m0s"},
		{name: "bad namespace", drains: "namespaces: {Team_A: 10m}", problem: `data.drains.namespaces.Team_A: "Team_A" is not a namespace name`},
		{name: "unknown field", drains: "timeout: 1h", problem: `data.drains: unknown field "timeout"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string]string{}
			if tc.drains != "" {
				data[KeyDrains] = tc.drains
			}
			c, err := Parse(data)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want one saying %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for ns, want := range tc.want {
				if got := c.DrainDeadline(ns); got != want {
					t.Errorf("DrainDeadline(%q) = %s, want %s", ns, got, want)
				}
			}
		})
	}
	var none *Config
	if got := none.DrainDeadline("team-a"); got != 0 {
		t.Errorf("no ConfigMap: deadline %s, want none", got)
	}
	base := map[string]string{KeyDefaults: "spec: {strategy: {type: rollingUpdate}}"}
	with := map[string]string{KeyDefaults: base[KeyDefaults], KeyDrains: "deadline: 1h"}
	if Revision(base) != Revision(with) {
		t.Error("a drain deadline changed the boundaries revision: it would roll out a change no group has")
	}
}
