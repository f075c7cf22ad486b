package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// A wave with approval: manual starts only after the admin approves it:
// the rollout waits (the record says why, one Event), an early approval
// (while the wave before it soaks) is kept, an approval with no wave
// waiting for one is refused, and the waves after it run on their own.
func TestWaveWithManualApprovalWaitsForTheAdmin(t *testing.T) {
	c, err := boundaries.Parse(map[string]string{"rollout": `
soak: 1m
failure: {startupTimeout: 5m}
waves:
- {name: canary, namespaces: [canary], approval: manual}
- {name: rest, approval: automatic}
`})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Rollout.Waves[0].Approval; got != boundaries.ApprovalManual {
		t.Fatalf("canary approval %q, want manual", got)
	}
	s := newSim(t, c.Rollout)

	res := s.step("")
	if s.rec.Wave != -1 || !strings.Contains(s.rec.WaitingFor, "wave canary waits for the admin's approval: kubectl annotate configmap <rollout record> instancemgr.keikoproj.io/rollout-action=approve") {
		t.Fatalf("before approval: wave %d, waiting for %q; want the canary waiting for approval", s.rec.Wave, s.rec.WaitingFor)
	}
	if res.After != 0 {
		t.Errorf("a wait for approval wakes the step after %s; only the approval should", res.After)
	}
	s.now = s.now.Add(time.Hour)
	s.step("")
	if got := strings.Count(s.reasons(), ReasonWaveAwaitingApproval); got != 1 {
		t.Fatalf("events %s: want one %s while the wait is the same", s.reasons(), ReasonWaveAwaitingApproval)
	}
	if s.group("canary/a").AtTarget {
		t.Fatal("canary/a moved before the approval")
	}

	res = s.step(record.ActionApprove)
	if !res.Acted || s.rec.Wave != 0 || s.rec.WaitingFor != "" || s.rec.Waves[0].ApprovedAt == nil {
		t.Fatalf("approved: acted %v, wave %d, waiting for %q; want the canary started", res.Acted, s.rec.Wave, s.rec.WaitingFor)
	}
	if !strings.HasPrefix(s.rec.LastAction, "approve of wave canary at ") || !strings.Contains(s.reasons(), ReasonWaveApproved) {
		t.Errorf("last action %q, events %s; want the approval recorded", s.rec.LastAction, s.reasons())
	}

	// The rest wave needs no approval: a second one is refused, nothing changes.
	res = s.step(record.ActionApprove)
	if !res.Acted || !strings.Contains(s.reasons(), ReasonActionIgnored) {
		t.Fatalf("approve with no wave waiting: acted %v, events %s; want it refused with an Event", res.Acted, s.reasons())
	}
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Wave != 1 || !s.group("team-b/b").AtTarget {
		t.Fatalf("after the canary soaked: wave %d; want the rest wave started on its own", s.rec.Wave)
	}
}

// An approval given while an earlier wave still soaks is kept for the
// wave that needs it.
func TestEarlyApprovalIsKept(t *testing.T) {
	c, err := boundaries.Parse(map[string]string{"rollout": canaryPolicy + "- {name: rest, approval: manual}\n"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, c.Rollout)
	s.step("")
	if s.rec.Wave != 0 {
		t.Fatalf("wave %d; want the canary started without approval", s.rec.Wave)
	}
	s.converge("canary/a")
	s.step(record.ActionApprove) // while the canary soaks
	if s.rec.Waves[1].ApprovedAt == nil {
		t.Fatal("an early approval of the rest wave was lost")
	}
	s.now = s.now.Add(2 * time.Minute)
	s.step("")
	if s.rec.Wave != 1 {
		t.Fatalf("after the soak: wave %d, waiting for %q; want the approved rest wave started", s.rec.Wave, s.rec.WaitingFor)
	}
}
