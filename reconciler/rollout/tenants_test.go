package rollout

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// tenantPolicy: a canary wave of approval: manual, then the rest; tenants
// may approve and defer up to an hour.
const tenantPolicy = `
soak: 1m
failure: {startupTimeout: 5m}
tenants: {approve: true, deferUpTo: 1h}
waves:
- {name: canary, namespaces: [canary], approval: manual}
`

// notesOn returns the reasons of the Events on group ("" the ConfigMap).
func (s *sim) notesOn(group string) string {
	var r []string
	for _, n := range s.notes {
		if n.Group == group {
			r = append(r, n.Reason)
		}
	}
	return strings.Join(r, ",")
}

// A tenant's approve moves its group now, ahead of its wave and while the
// admin's approval of the manual canary is pending; no other group moves,
// the plan leaves it out, and the waves do not take it again.
func TestTenantApprovesItsGroupAheadOfItsWave(t *testing.T) {
	s := newSim(t, policy(t, tenantPolicy))
	s.group("team-b/b").Tenant = v1alpha1.RolloutApprove
	s.step("")
	if s.rec.Wave != -1 || !strings.Contains(s.rec.WaitingFor, "admin's approval") {
		t.Fatalf("wave %d, waiting for %q; want the canary waiting for the admin", s.rec.Wave, s.rec.WaitingFor)
	}
	if !s.group("team-b/b").AtTarget || len(s.rec.Early) != 1 || s.rec.Early[0].Group != "team-b/b" {
		t.Fatalf("early %+v; want team-b/b moved early", s.rec.Early)
	}
	for _, k := range []string{"canary/a", "team-c/c", "team-d/d"} {
		if s.group(k).AtTarget {
			t.Fatalf("%s moved with another group's early approval", k)
		}
	}
	if !strings.Contains(s.notesOn("team-b/b"), ReasonGroupMovedEarly) {
		t.Errorf("events on team-b/b: %s; want %s", s.notesOn("team-b/b"), ReasonGroupMovedEarly)
	}
	for _, w := range s.rec.Waves {
		for _, p := range w.Planned {
			if p == "team-b/b" {
				t.Errorf("wave %s still plans team-b/b", w.Name)
			}
		}
	}
	if !strings.Contains(s.rec.Message, "moved by their tenants: 1 early") {
		t.Errorf("message %q; want the early group counted", s.rec.Message)
	}

	s.converge("team-b/b")
	s.step(record.ActionApprove)
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	s.converge("team-c/c", "team-d/d")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseComplete {
		t.Fatalf("phase %s (%s); want Complete", s.rec.Phase, s.rec.Message)
	}
	if s.rec.WaveOf("team-b/b") >= 0 || s.rec.Early[0].State != record.GroupHealthy {
		t.Errorf("team-b/b in wave %d, early state %s; want it in no wave, judged Healthy alone", s.rec.WaveOf("team-b/b"), s.rec.Early[0].State)
	}
}

// An annotation the policy does not allow does nothing.
func TestTenantChoicesThePolicyDoesNotAllowAreIgnored(t *testing.T) {
	s := newSim(t, policy(t, strings.Replace(tenantPolicy, "tenants: {approve: true, deferUpTo: 1h}", "", 1)))
	s.group("team-b/b").Tenant = v1alpha1.RolloutApprove
	s.group("canary/a").Tenant = v1alpha1.RolloutDefer
	s.step("")
	if s.group("team-b/b").AtTarget || len(s.rec.Early) > 0 {
		t.Fatal("team-b/b moved early without rollout.tenants.approve")
	}
	s.step(record.ActionApprove)
	if !s.group("canary/a").AtTarget || len(s.rec.Deferred) > 0 {
		t.Fatal("canary/a deferred without rollout.tenants.deferUpTo")
	}
}

// A deferred group stays out of its wave, which does not wait for it; it
// moves when the bound passes (never later than deferUpTo after its wave
// started), is judged alone, and the rollout completes only after it.
func TestTenantDefersItsGroupUntilTheBound(t *testing.T) {
	s := newSim(t, policy(t, tenantPolicy))
	s.group("team-b/b").Tenant = v1alpha1.RolloutDefer
	s.step(record.ActionApprove)
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	res := s.step("") // the rest wave starts without team-b/b
	started := s.now
	if s.rec.Wave != 1 || s.group("team-b/b").AtTarget || !s.group("team-c/c").AtTarget {
		t.Fatalf("wave %d, team-b/b at target %v; want the rest wave started without it", s.rec.Wave, s.group("team-b/b").AtTarget)
	}
	if len(s.rec.Deferred) != 1 || s.rec.Deferred[0].Wave != "rest" || !s.rec.Deferred[0].Until.Time.Equal(started.Add(time.Hour)) {
		t.Fatalf("deferred %+v; want team-b/b out of rest until an hour after it started", s.rec.Deferred)
	}
	if res.After == 0 || res.After > time.Hour {
		t.Errorf("after %s; want a wake-up at the bound at the latest", res.After)
	}
	if !strings.Contains(s.notesOn("team-b/b"), ReasonGroupDeferred) {
		t.Errorf("events on team-b/b: %s; want %s", s.notesOn("team-b/b"), ReasonGroupDeferred)
	}
	s.converge("team-c/c", "team-d/d")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Waves[1].CompletedAt == nil || s.rec.Phase != record.PhaseProgressing || s.group("team-b/b").AtTarget {
		t.Fatalf("rest completed %v, phase %s, team-b/b moved %v; want the wave done without it and the rollout open for it",
			s.rec.Waves[1].CompletedAt != nil, s.rec.Phase, s.group("team-b/b").AtTarget)
	}
	s.now = started.Add(time.Hour)
	s.step("")
	if !s.group("team-b/b").AtTarget || len(s.rec.Deferred) != 0 || len(s.rec.Late) != 1 {
		t.Fatalf("at the bound: deferred %+v, late %+v; want team-b/b moved", s.rec.Deferred, s.rec.Late)
	}
	if !strings.Contains(s.notesOn("team-b/b"), ReasonGroupDeferralEnded) {
		t.Errorf("events on team-b/b: %s; want %s", s.notesOn("team-b/b"), ReasonGroupDeferralEnded)
	}
	s.converge("team-b/b")
	s.step("")
	if s.rec.Phase != record.PhaseComplete {
		t.Fatalf("phase %s (%s); want Complete once the late group is healthy", s.rec.Phase, s.rec.Message)
	}
}

// A wave keeps at least one group: the canary's only group, deferred,
// moves with it (a Warning says why). Removing the annotation ends a
// deferral at once; a bound that passes while the maintenance windows
// are closed waits for the next window.
func TestTenantEndsItsDeferral(t *testing.T) {
	c, err := boundaries.Parse(map[string]string{"rollout": "soak: 1m\nfailure: {startupTimeout: 5m}\ntenants: {deferUpTo: 30m}\nwaves:\n- {name: canary, namespaces: [canary]}\nwindows: [{start: \"12:00\", duration: 1h}]\n"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, c.Rollout) // 12:00 UTC: in the window
	s.maint = c.Maintenance
	for _, k := range []string{"canary/a", "team-b/b", "team-c/c"} {
		s.group(k).Tenant = v1alpha1.RolloutDefer
	}
	s.step("")
	if s.rec.Wave != 0 || len(s.rec.Deferred) != 0 || !s.group("canary/a").AtTarget {
		t.Fatalf("wave %d, deferred %+v; want the canary started with its only group despite its deferral", s.rec.Wave, s.rec.Deferred)
	}
	if msg := strings.Join(noteMessages(s, "canary/a"), " "); !strings.Contains(msg, "every group of wave canary is deferred and a wave judges at least one group") {
		t.Fatalf("events on canary/a %q; want why its deferral was not granted", msg)
	}
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("") // 12:02: the rest wave starts without team-b/b and team-c/c (until 12:32)
	if s.rec.Wave != 1 || len(s.rec.Deferred) != 2 || s.group("team-b/b").AtTarget || s.group("team-c/c").AtTarget || !s.group("team-d/d").AtTarget {
		t.Fatalf("wave %d, deferred %+v; want rest started with team-d/d only", s.rec.Wave, s.rec.Deferred)
	}
	s.now = s.now.Add(time.Minute)
	s.group("team-b/b").Tenant = ""
	s.step("")
	if !s.group("team-b/b").AtTarget || len(s.rec.Late) != 1 || !strings.Contains(strings.Join(noteMessages(s, "team-b/b"), " "), "its tenant removed") {
		t.Fatalf("annotation removed: late %+v; want team-b/b moved, saying why", s.rec.Late)
	}
	s.converge("team-b/b", "team-d/d")
	s.step("")
	s.now = time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC)
	res := s.step("")
	if s.group("team-c/c").AtTarget || len(s.rec.Deferred) != 1 {
		t.Fatal("team-c/c moved outside the maintenance window")
	}
	if res.After == 0 || res.After > 23*time.Hour {
		t.Errorf("after %s; want a wake-up when the window opens", res.After)
	}
	s.now = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	s.step("")
	if !s.group("team-c/c").AtTarget || len(s.rec.Deferred) != 0 {
		t.Fatal("team-c/c did not move in the next window")
	}
}

func noteMessages(s *sim, group string) []string {
	var out []string
	for _, n := range s.notes {
		if n.Group == group {
			out = append(out, n.Message)
		}
	}
	return out
}

// A group its tenant moved early that fails is reported on the group and
// the ConfigMap, and halts nothing: the canary (and the rest) go on, the
// failure counts in no wave, and the rollout completes with it failed.
func TestEarlyGroupFailingDoesNotHaltTheRollout(t *testing.T) {
	s := newSim(t, policy(t, tenantPolicy))
	s.group("team-b/b").Tenant = v1alpha1.RolloutApprove
	s.step("")
	b := s.group("team-b/b")
	b.ObservedGeneration, b.State, b.Message = b.Generation, v1alpha1.StateError, "launch failed"
	s.step("")
	if s.rec.Phase != record.PhaseProgressing || s.rec.Early[0].State != record.GroupFailed || s.rec.Early[0].Criterion != record.CriterionGroupError {
		t.Fatalf("phase %s, early %+v; want team-b/b failed alone and the rollout progressing", s.rec.Phase, s.rec.Early)
	}
	if !strings.Contains(s.notesOn("team-b/b"), ReasonTenantGroupFailed) || !strings.Contains(s.notesOn(""), ReasonTenantGroupFailed) || strings.Contains(s.reasons(), ReasonHalted) {
		t.Fatalf("events %s; want %s on the group and the ConfigMap, no halt", s.reasons(), ReasonTenantGroupFailed)
	}
	s.step("")
	if got := strings.Count(s.reasons(), ReasonTenantGroupFailed); got != 2 {
		t.Errorf("events %s: want the failure reported once (group and ConfigMap)", s.reasons())
	}
	observe(s.rec, nil)
	var m dto.Metric
	if err := tenantGroups.WithLabelValues("failed").Write(&m); err != nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("tenant_groups{choice=failed} %v (%v), want 1", m.GetGauge().GetValue(), err)
	}
	// The same tenant cannot halt the fleet by timing its failure into a wave.
	s.step(record.ActionApprove)
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	s.converge("team-c/c", "team-d/d")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Phase != record.PhaseComplete || s.rec.Halt != nil {
		t.Fatalf("phase %s (%s); want Complete despite the early group's failure", s.rec.Phase, s.rec.Message)
	}
	// The completion says the revision failed on that group.
	last := s.notes[len(s.notes)-1]
	if last.Reason != ReasonComplete || !last.Warning || !strings.Contains(last.Message, "failed on 1 group(s)") || !strings.Contains(last.Message, "team-b/b") {
		t.Fatalf("last Event %+v; want a Warning %s naming team-b/b", last, ReasonComplete)
	}
	for _, w := range s.rec.Waves {
		for _, g := range w.Groups {
			if g.Group == "team-b/b" {
				t.Fatalf("wave %s took the early group", w.Name)
			}
		}
	}
}
