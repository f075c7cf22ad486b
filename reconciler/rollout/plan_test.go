package rollout

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// The plan of every wave not started names exactly the groups the wave
// then takes, follows groups created before the wave starts, and counts
// their nodes; the record's message names the next wave's plan.
func TestPlanNamesTheGroupsTheWaveTakes(t *testing.T) {
	s := newSim(t, policy(t, `
soak: 1m
failure: {startupTimeout: 5m}
waves:
- {name: canary, namespaces: [canary], approval: manual}
- {name: half, percent: 50}
`))
	for i := range 6 {
		ns := fmt.Sprintf("team-%c", 'e'+i)
		s.groups = append(s.groups, Group{Key: ns + "/g", Namespace: ns, Running: "old", Generation: 1, ObservedGeneration: 1,
			State: v1alpha1.StateReady, Ready: true, NodesUpdated: 3, NodesTotal: 3, Nodes: 3, InService: 3, ReadyNodes: 3, NodesReady: true})
	}
	s.step("")
	if s.rec.Wave != -1 {
		t.Fatalf("wave %d started before the approval", s.rec.Wave)
	}
	canary := s.rec.Waves[0]
	if !reflect.DeepEqual(canary.Planned, []string{"canary/a"}) || canary.PlannedCount != 1 || canary.PlannedNodes != 2 {
		t.Fatalf("canary plan %v (%d groups, %d nodes); want canary/a, 2 nodes", canary.Planned, canary.PlannedCount, canary.PlannedNodes)
	}
	if len(s.rec.Waves) != 3 || s.rec.Waves[1].PlannedCount != 5 || s.rec.Waves[2].PlannedCount != 4 {
		t.Fatalf("plans %+v; want half of 9 (5) then the rest (4)", s.rec.Waves)
	}
	if !strings.Contains(s.rec.Message, "next wave 1/3 canary: 1 group(s), 2 node(s) planned, unknown until a wave completes") {
		t.Errorf("message %q; want the canary's plan", s.rec.Message)
	}
	// A group created before the waves start joins the plan.
	late := s.groups[len(s.groups)-1]
	late.Key, late.Namespace = "canary/late", "canary"
	s.groups = append(s.groups, late)
	s.step("")
	if got := s.rec.Waves[0].Planned; !reflect.DeepEqual(got, []string{"canary/a", "canary/late"}) {
		t.Fatalf("canary plan after a group was created: %v", got)
	}
	plans := [][]string{slices.Clone(s.rec.Waves[0].Planned), slices.Clone(s.rec.Waves[1].Planned), slices.Clone(s.rec.Waves[2].Planned)}

	s.step(record.ActionApprove)
	for wave := range 3 {
		if s.rec.Wave != wave {
			t.Fatalf("wave %d, want %d started", s.rec.Wave, wave)
		}
		var took []string
		for _, g := range s.rec.Waves[wave].Groups {
			took = append(took, g.Group)
		}
		slices.Sort(took)
		if !reflect.DeepEqual(took, plans[wave]) {
			t.Fatalf("wave %s took %v; its plan was %v", s.rec.Waves[wave].Name, took, plans[wave])
		}
		s.converge(took...)
		s.step("")
		s.now = s.now.Add(2 * time.Minute)
		s.step("")
	}
	if s.rec.Phase != record.PhaseComplete {
		t.Fatalf("phase %s, want Complete", s.rec.Phase)
	}
}

// A wave's plan keeps at most record.MaxPlanned names and counts them all.
func TestPlanIsBounded(t *testing.T) {
	s := newSim(t, policy(t, canaryPolicy))
	for i := range record.MaxPlanned + 10 {
		ns := fmt.Sprintf("bulk-%03d", i)
		s.groups = append(s.groups, Group{Key: ns + "/g", Namespace: ns, Running: "old", NodesTotal: 1})
	}
	s.step("")
	rest := s.rec.Waves[1]
	if len(rest.Planned) != record.MaxPlanned || rest.PlannedCount != record.MaxPlanned+13 || rest.PlannedNodes != 3*2+record.MaxPlanned+10 {
		t.Fatalf("rest plan: %d names, count %d, nodes %d", len(rest.Planned), rest.PlannedCount, rest.PlannedNodes)
	}
}

// The rollout's start records the defaults' changes between the stable
// revision and the target, or why they are unknown.
func TestRolloutRecordsTheDefaultsChanges(t *testing.T) {
	parse := func(ami string) *boundaries.Config {
		c, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  eks:\n    configuration:\n      image: " + ami + "\n"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pol := policy(t, canaryPolicy)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	first := Step(nil, Input{Now: now, Revision: "old", Policy: pol, Groups: fleet()}).Record
	for _, tc := range []struct {
		name    string
		configs map[string]*boundaries.Config
		want    []record.Change
		unknown string
	}{
		{"both known", map[string]*boundaries.Config{"old": parse("ami-a"), "new": parse("ami-b")},
			[]record.Change{{Path: "spec.eks.configuration.image", Old: "ami-a", New: "ami-b"}}, ""},
		{"stable unknown", map[string]*boundaries.Config{"new": parse("ami-b")}, nil, "revision(s) old were not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Step(first, Input{Now: now, Revision: "new", Policy: pol, Groups: fleet(), Configs: tc.configs})
			rec := res.Record
			if !reflect.DeepEqual(rec.Changes, tc.want) || rec.ChangesCount != len(tc.want) || !strings.Contains(rec.ChangesUnknown, tc.unknown) || (tc.unknown == "") != (rec.ChangesUnknown == "") {
				t.Fatalf("changes %+v (%d), unknown %q; want %+v, unknown %q", rec.Changes, rec.ChangesCount, rec.ChangesUnknown, tc.want, tc.unknown)
			}
			if tc.want != nil && !strings.Contains(res.Notes[0].Message, "default changes: spec.eks.configuration.image: ami-a -> ami-b") {
				t.Errorf("started event %q; want the change", res.Notes[0].Message)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		nodes, perHour int
		soak           time.Duration
		want           string
	}{
		{40, 20, 10 * time.Minute, "about 2h10m0s (40 node(s) at 20/h, the pace of wave canary, plus soak 10m0s)"},
		{40, 0, 10 * time.Minute, "unknown until a wave completes with a measured pace (40 node(s) to replace, plus soak 10m0s)"},
		{0, 0, time.Minute, "about 1m0s (no node to replace, soak 1m0s)"},
	} {
		if got := estimate(tc.nodes, tc.soak, tc.perHour, "canary"); got != tc.want {
			t.Errorf("estimate(%d, %s, %d) = %q, want %q", tc.nodes, tc.soak, tc.perHour, got, tc.want)
		}
	}
}

// The estimate uses the last completed wave's pace.
func TestLastPace(t *testing.T) {
	done := time.Now()
	rec := &record.Record{Wave: 1, Waves: []record.Wave{{Name: "a", NodesPerHour: 30}, {Name: "b", NodesPerHour: 12}, {Name: "c"}}}
	if n, _ := lastPace(rec); n != 0 {
		t.Fatalf("pace %d with no wave completed", n)
	}
	at := &metav1.Time{Time: done}
	rec.Waves[0].CompletedAt = at
	if n, from := lastPace(rec); n != 30 || from != "a" {
		t.Fatalf("pace %d of %s, want 30 of a", n, from)
	}
	rec.Waves[1].CompletedAt = at
	if n, from := lastPace(rec); n != 12 || from != "b" {
		t.Fatalf("pace %d of %s, want 12 of b", n, from)
	}
}

// The next wave's plan is a gauge; 0 once no wave is left.
func TestNextWavePlannedGauge(t *testing.T) {
	for _, tc := range []struct {
		rec           *record.Record
		groups, nodes float64
	}{
		{&record.Record{Phase: record.PhaseProgressing, Wave: 0, Waves: []record.Wave{{}, {PlannedCount: 7, PlannedNodes: 21}}}, 7, 21},
		{&record.Record{Phase: record.PhaseProgressing, Wave: 1, Waves: []record.Wave{{}, {PlannedCount: 7, PlannedNodes: 21}}}, 0, 0},
		{&record.Record{Phase: record.PhaseComplete, Wave: -1, Waves: []record.Wave{{PlannedCount: 7}}}, 0, 0},
	} {
		observe(tc.rec, nil)
		if g, n := gauge(t, "groups"), gauge(t, "nodes"); g != tc.groups || n != tc.nodes {
			t.Errorf("wave %d of %d: gauge %v groups, %v nodes; want %v, %v", tc.rec.Wave, len(tc.rec.Waves), g, n, tc.groups, tc.nodes)
		}
	}
}

func gauge(t *testing.T, unit string) float64 {
	t.Helper()
	var m dto.Metric
	if err := nextPlanned.WithLabelValues(unit).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
