package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

func policy(t *testing.T, rollout string) *boundaries.RolloutPolicy {
	t.Helper()
	c, err := boundaries.Parse(map[string]string{"rollout": rollout})
	if err != nil {
		t.Fatal(err)
	}
	return c.Rollout
}

// fleet is a canary group and three others, all Ready on revision old.
func fleet() []Group {
	var gs []Group
	for _, k := range []string{"canary/a", "team-b/b", "team-c/c", "team-d/d"} {
		ns, _, _ := strings.Cut(k, "/")
		gs = append(gs, Group{Key: k, Namespace: ns, Running: "old", Generation: 1, ObservedGeneration: 1,
			State: v1alpha1.StateReady, Ready: true, NodesUpdated: 2, NodesTotal: 2, Nodes: 2, InService: 2, ReadyNodes: 2, NodesReady: true})
	}
	return gs
}

// sim steps a rollout of revision "new" over a fleet whose groups move
// to the target as soon as the record assigns it (what the fan-out does).
type sim struct {
	t      *testing.T
	now    time.Time
	pol    *boundaries.RolloutPolicy
	maint  *boundaries.Maintenance
	groups []Group
	rec    *record.Record
	notes  []Note
}

func newSim(t *testing.T, pol *boundaries.RolloutPolicy) *sim {
	s := &sim{t: t, now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), pol: pol, groups: fleet()}
	// The first record makes "old" stable.
	s.rec = Step(nil, Input{Now: s.now, Revision: "old", Policy: pol, Groups: s.groups}).Record
	return s
}

func (s *sim) step(action string) Result {
	s.t.Helper()
	res := Step(s.rec, Input{Now: s.now, Revision: "new", Policy: s.pol, Maintenance: s.maint, Groups: s.groups, Action: action})
	s.rec = res.Record
	s.notes = append(s.notes, res.Notes...)
	// The fan-out moves the groups the record assigns; the move bumps
	// the generation and starts a rotation.
	for i := range s.groups {
		g := &s.groups[i]
		assigned := s.rec.Phase == record.PhaseComplete ||
			s.rec.Phase == record.PhaseProgressing && !s.rec.IsDeferred(g.Key) &&
				(s.rec.WaveOf(g.Key) >= 0 || s.rec.LastWaveStarted() || s.rec.TenantMoved(g.Key) != "")
		if s.rec.IsRolledBack(g.Key) {
			assigned = false
		}
		if assigned && !g.AtTarget {
			g.AtTarget, g.Running, g.Generation = true, "new", g.Generation+1
			g.State, g.NodesUpdated = v1alpha1.StateUpgrading, 0
		}
		if !assigned && g.AtTarget && s.rec.IsRolledBack(g.Key) {
			g.AtTarget, g.Running, g.Generation = false, "old", g.Generation+1
		}
	}
	return res
}

// converge makes every moved group finish its rotation healthily.
func (s *sim) converge(keys ...string) {
	for i := range s.groups {
		g := &s.groups[i]
		for _, k := range keys {
			if g.Key == k && g.AtTarget {
				g.ObservedGeneration, g.State, g.Ready, g.NodesUpdated = g.Generation, v1alpha1.StateReady, true, g.NodesTotal
				g.InService, g.ReadyNodes, g.NodesReady = g.NodesTotal, g.NodesTotal, true
			}
		}
	}
}

func (s *sim) group(key string) *Group {
	for i := range s.groups {
		if s.groups[i].Key == key {
			return &s.groups[i]
		}
	}
	s.t.Fatalf("no group %s", key)
	return nil
}

func (s *sim) reasons() string {
	var r []string
	for _, n := range s.notes {
		r = append(r, n.Reason)
	}
	return strings.Join(r, ",")
}

const canaryPolicy = `
soak: 1m
failure: {startupTimeout: 5m}
waves:
- {name: canary, namespaces: [canary]}
`

func TestWavesRunInOrderWithSoak(t *testing.T) {
	s := newSim(t, policy(t, canaryPolicy))
	if s.rec.Phase != record.PhaseComplete || s.rec.Stable != "old" {
		t.Fatalf("first record = %+v, want old Complete and stable", s.rec)
	}
	s.step("")
	if s.rec.Phase != record.PhaseProgressing || s.rec.Wave != 0 || s.rec.Stable != "old" || s.rec.Target != "new" {
		t.Fatalf("record = %+v, want the canary wave of new progressing from old", s.rec)
	}
	if got := s.rec.Waves[0].Groups; len(got) != 1 || got[0].Group != "canary/a" {
		t.Fatalf("canary wave = %+v, want canary/a only", got)
	}
	for _, k := range []string{"team-b/b", "team-c/c", "team-d/d"} {
		if s.group(k).AtTarget {
			t.Fatalf("%s moved before its wave", k)
		}
	}
	s.step("") // the canary is rotating
	if st := s.rec.Waves[0].Groups[0].State; st != record.GroupRotating {
		t.Fatalf("canary state %s, want Rotating", st)
	}
	s.converge("canary/a")
	s.step("")
	if s.rec.Waves[0].HealthyAt == nil || s.rec.Wave != 0 {
		t.Fatalf("canary wave = %+v, want soaking", s.rec.Waves[0])
	}
	s.now = s.now.Add(30 * time.Second)
	if res := s.step(""); s.rec.Wave != 0 || res.After != 30*time.Second {
		t.Fatalf("mid-soak: wave %d, after %s; want wave 0 and a wake-up when the soak ends", s.rec.Wave, res.After)
	}
	s.now = s.now.Add(31 * time.Second)
	s.step("")
	if s.rec.Wave != 1 || s.rec.Waves[1].Name != boundaries.RestWave || len(s.rec.Waves[1].Groups) != 3 {
		t.Fatalf("after the soak: %+v, want the rest wave with the 3 other groups", s.rec)
	}
	s.converge("team-b/b", "team-c/c", "team-d/d")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseComplete || s.rec.Stable != "new" {
		t.Fatalf("record = %+v, want Complete with new stable", s.rec)
	}
	want := "RolloutStarted,RolloutWaveStarted,RolloutWaveSoaking,RolloutWaveCompleted,RolloutWaveStarted,RolloutWaveSoaking,RolloutWaveCompleted,RolloutComplete"
	if got := s.reasons(); got != want {
		t.Errorf("Events %s\nwant   %s", got, want)
	}
}

func TestCanaryThatNeverBecomesReadyHaltsAndRollsBack(t *testing.T) {
	s := newSim(t, policy(t, canaryPolicy))
	s.step("")
	s.step("")
	s.now = s.now.Add(4 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseProgressing {
		t.Fatalf("halted before the startup timeout: %+v", s.rec.Halt)
	}
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt == nil || s.rec.Halt.Wave != "canary" ||
		len(s.rec.Halt.Groups) != 1 || s.rec.Halt.Groups[0] != "canary/a" || s.rec.Halt.Criterion != record.CriterionStartupTimeout {
		t.Fatalf("record = %+v halt %+v, want halted on canary/a's startup timeout", s.rec, s.rec.Halt)
	}
	if !strings.Contains(s.rec.Halt.Reason, "startup timeout 5m0s") {
		t.Errorf("halt reason %q does not name the timeout", s.rec.Halt.Reason)
	}
	// Halted: nothing else moves, however long it waits.
	s.now = s.now.Add(time.Hour)
	s.step("")
	for _, k := range []string{"team-b/b", "team-c/c", "team-d/d"} {
		if s.group(k).AtTarget || s.rec.WaveOf(k) >= 0 {
			t.Fatalf("%s moved after the halt", k)
		}
	}
	if s.rec.GroupsFailed != 1 || s.rec.GroupsWaiting != 3 {
		t.Errorf("counts done %d failed %d waiting %d", s.rec.GroupsDone, s.rec.GroupsFailed, s.rec.GroupsWaiting)
	}
	if !strings.Contains(s.reasons(), ReasonHalted+","+ReasonGroupFailed) {
		t.Errorf("Events %s: want RolloutHalted and RolloutGroupFailed", s.reasons())
	}
	res := s.step(record.ActionRollback)
	if !res.Acted || s.rec.Phase != record.PhaseRolledBack || !s.rec.IsRolledBack("canary/a") || s.group("canary/a").AtTarget {
		t.Fatalf("after rollback: %+v; canary at target %v", s.rec, s.group("canary/a").AtTarget)
	}
	// A second rollback is refused, with a reason.
	if res := s.step(record.ActionRollback); !res.Acted || res.Notes[0].Reason != ReasonActionIgnored {
		t.Fatalf("second rollback: %+v", res.Notes)
	}
	// Resume moves the canary to the target again with a fresh clock.
	s.step(record.ActionResume)
	if s.rec.Phase != record.PhaseProgressing || len(s.rec.RolledBack) != 0 || !s.group("canary/a").AtTarget {
		t.Fatalf("after resume: %+v", s.rec)
	}
	s.converge("canary/a")
	s.step("")
	if st := s.rec.Waves[0].Groups[0].State; st != record.GroupHealthy {
		t.Fatalf("canary after resume: %s", st)
	}
}

func TestGroupErrorAndUnhealthyNodesFailAWave(t *testing.T) {
	s := newSim(t, policy(t, canaryPolicy))
	s.step("")
	c := s.group("canary/a")
	c.ObservedGeneration, c.State, c.Message = c.Generation, v1alpha1.StateError, "launch template: InvalidAMIID.NotFound"
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionGroupError || !strings.Contains(s.rec.Halt.Reason, "InvalidAMIID") {
		t.Fatalf("halt %+v, want the group's Error", s.rec.Halt)
	}

	s = newSim(t, policy(t, canaryPolicy))
	s.step("")
	s.converge("canary/a")
	s.step("") // healthy, soaking
	c = s.group("canary/a")
	c.NotReadyNodes = 1 // 1 of 2: 50% > 10%
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionUnhealthyNodes {
		t.Fatalf("halt %+v, want unhealthy nodes", s.rec.Halt)
	}
}

func TestPercentWaveAndUnjudgedGroups(t *testing.T) {
	s := newSim(t, policy(t, "soak: 0s\nwaves:\n- {name: half, percent: 50}\n"))
	// A group already failing before the rollout is moved but not judged.
	s.group("team-d/d").State = v1alpha1.StateError
	s.step("")
	first := s.rec.Waves[0].Groups
	if len(first) != 2 {
		t.Fatalf("50%% of 4 groups = %d groups", len(first))
	}
	again := newSim(t, s.pol)
	again.group("team-d/d").State = v1alpha1.StateError
	again.step("")
	if again.rec.Waves[0].Groups[0].Group != first[0].Group || again.rec.Waves[0].Groups[1].Group != first[1].Group {
		t.Error("the percent wave chose other groups for the same fleet")
	}
	for range 4 {
		for _, g := range s.groups {
			s.converge(g.Key)
		}
		s.group("team-d/d").State = v1alpha1.StateError
		s.step("")
	}
	if s.rec.Phase != record.PhaseComplete {
		t.Fatalf("record %+v: an unjudged group in Error halted the rollout", s.rec)
	}
}

func TestNoPolicyIsTodaysFanOutAndActionsAreRefused(t *testing.T) {
	res := Step(&record.Record{Target: "old", Stable: "old", Phase: record.PhaseHalted}, Input{Now: time.Now(), Revision: "new", Groups: fleet(), Action: "resume"})
	if res.Record.Phase != record.PhaseComplete || res.Record.Stable != "new" || res.Record.Target != "new" {
		t.Fatalf("record %+v, want new complete at once", res.Record)
	}
	if !res.Acted || len(res.Notes) != 1 || res.Notes[0].Reason != ReasonActionIgnored {
		t.Fatalf("notes %+v, want the action refused", res.Notes)
	}
}

func TestRefusedReadmissionHaltsAndLateGroupsJoinTheLastWave(t *testing.T) {
	s := newSim(t, policy(t, "soak: 0s\nwaves:\n- {name: canary, namespaces: [canary]}\n"))
	s.step("")
	c := s.group("canary/a")
	c.AtTarget, c.Running, c.Rejected = false, "old", "quota exceeded: spec.eks.maxSize"
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionRejected {
		t.Fatalf("halt %+v, want the refused re-admission", s.rec.Halt)
	}

	s = newSim(t, policy(t, "soak: 0s\nwaves:\n- {name: canary, namespaces: [canary]}\n"))
	s.step("")
	s.converge("canary/a")
	s.step("") // the canary is healthy: the rest wave starts, its groups rotate
	if !s.rec.LastWaveStarted() || s.rec.Phase != record.PhaseProgressing {
		t.Fatalf("record %+v, want the last wave started", s.rec)
	}
	s.groups = append(s.groups, Group{Key: "team-e/e", Namespace: "team-e", Running: "old", Generation: 1, ObservedGeneration: 1,
		State: v1alpha1.StateReady, Ready: true})
	s.step("")
	if s.rec.WaveOf("team-e/e") != len(s.rec.Waves)-1 {
		t.Fatalf("a group created during the last wave is not in it: %+v", s.rec.Waves)
	}
}

// healthy needs every InService instance to be a Ready node; unhealthy
// counts Nodes not Ready and InService instances without a Ready node.
func TestHealthyNeedsReadyNodes(t *testing.T) {
	ready := Group{Generation: 2, ObservedGeneration: 2, State: v1alpha1.StateReady, Ready: true}
	for _, c := range []struct {
		name    string
		edit    func(*Group)
		healthy bool
		bad, of int
	}{
		{"every instance a Ready node", func(g *Group) {
			g.NodesUpdated, g.NodesTotal, g.InService, g.ReadyNodes, g.NodesReady, g.Nodes = 2, 2, 2, 2, true, 2
		}, true, 0, 2},
		{"minSize 0, new instances never registered", func(g *Group) {
			g.NodesUpdated, g.NodesTotal, g.InService = 2, 2, 2
		}, false, 2, 2},
		{"one of three without a Ready node", func(g *Group) {
			g.NodesUpdated, g.NodesTotal, g.InService, g.ReadyNodes, g.Nodes, g.NotReadyNodes = 3, 3, 3, 2, 3, 1
		}, false, 1, 3},
		{"no instance at all (minSize 0, scaled in)", func(g *Group) {}, true, 0, 0},
		{"instances launching, none in service yet", func(g *Group) { g.NodesUpdated, g.NodesTotal = 2, 2 }, false, 0, 0},
		{"a Node of an instance leaving counted, not as missing", func(g *Group) {
			g.NodesUpdated, g.NodesTotal, g.InService, g.ReadyNodes, g.NodesReady, g.Nodes = 2, 2, 2, 2, true, 3
		}, true, 0, 3},
		{"status of an older generation", func(g *Group) {
			g.NodesUpdated, g.NodesTotal, g.InService, g.ReadyNodes, g.NodesReady, g.Nodes = 2, 2, 2, 2, true, 2
			g.Generation = 3
		}, false, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ready
			c.edit(&g)
			if got := g.healthy(); got != c.healthy {
				t.Errorf("healthy %v, want %v", got, c.healthy)
			}
			if bad, of := g.unhealthy(); bad != c.bad || of != c.of {
				t.Errorf("unhealthy %d of %d, want %d of %d", bad, of, c.bad, c.of)
			}
		})
	}
}

// A canary whose new instances never become nodes (minSize 0: the group
// stays Ready, every instance is on the new launch template) is not
// healthy: it fails on the startup timeout, or, once node health reports
// them (NodesHealthy False), at once on maxUnhealthyPercent, where they
// count as unhealthy. It never passes the wave.
func TestCanaryWhoseInstancesNeverBecomeNodesFails(t *testing.T) {
	neverJoined := func(s *sim) {
		c := s.group("canary/a")
		c.ObservedGeneration, c.State, c.Ready, c.NodesUpdated = c.Generation, v1alpha1.StateReady, true, c.NodesTotal
		c.InService, c.ReadyNodes, c.NodesReady, c.Nodes = 2, 0, false, 0
	}
	s := newSim(t, policy(t, canaryPolicy))
	s.step("")
	neverJoined(s)
	s.step("")
	if st := s.rec.Waves[0].Groups[0].State; st != record.GroupRotating || s.rec.Phase != record.PhaseProgressing {
		t.Fatalf("canary %s, phase %s: want Rotating (not healthy) while its instances have no Ready node", st, s.rec.Phase)
	}
	s.now = s.now.Add(5 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionStartupTimeout || !strings.Contains(s.rec.Halt.Reason, "0 of 2 in-service instance(s) with Ready nodes") {
		t.Fatalf("halt %+v, want the startup timeout naming 0 of 2 Ready", s.rec.Halt)
	}

	s = newSim(t, policy(t, canaryPolicy))
	s.step("")
	neverJoined(s)
	s.group("canary/a").NodesUnhealthy = true
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionUnhealthyNodes || !strings.Contains(s.rec.Halt.Reason, "2 of 2 in-service instance(s) without a Ready node") {
		t.Fatalf("halt %+v, want unhealthy nodes counting the instances without nodes", s.rec.Halt)
	}
}

// The first look at a moved group may read its status for the old spec
// (every instance updated: its reconcile has not seen the move yet). The
// count falling to the new spec's is not progress, but the rotation's
// progress from there restarts the startup clock: a rotation longer than
// the startup timeout, making progress, does not fail.
func TestAStaleFirstStatusDoesNotHideProgress(t *testing.T) {
	s := newSim(t, policy(t, canaryPolicy))
	s.step("") // the canary wave starts; the fan-out moves canary/a
	c := s.group("canary/a")
	c.NodesUpdated = c.NodesTotal // its status still says the old spec's
	s.step("")
	for updated := 0; updated <= c.NodesTotal; updated++ {
		s.now = s.now.Add(4 * time.Minute) // under the 5m startup timeout each
		s.group("canary/a").NodesUpdated = updated
		s.step("")
		if s.rec.Phase != record.PhaseProgressing {
			t.Fatalf("after %d of %d updated: %s %+v", updated, c.NodesTotal, s.rec.Phase, s.rec.Halt)
		}
	}
}
