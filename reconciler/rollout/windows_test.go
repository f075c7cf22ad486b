package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
)

// A wave starts only inside a maintenance window: the first waits for the
// window to open (one Event, the record says why, the step wakes when it
// opens); a wave whose turn comes after the window closed waits for the
// next one.
func TestWavesStartOnlyInsideMaintenanceWindows(t *testing.T) {
	c, err := boundaries.Parse(map[string]string{"rollout": canaryPolicy + "windows: [{start: \"13:00\", duration: 1h}]\n"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, c.Rollout) // at 12:00 UTC
	s.maint = c.Maintenance

	res := s.step("")
	if s.rec.Wave != -1 || res.After != time.Hour || !strings.Contains(s.rec.WaitingFor, "the next opens at 2026-01-01T13:00:00Z") {
		t.Fatalf("before the window: wave %d, after %s, waiting for %q; want no wave, a wake-up at 13:00 and why", s.rec.Wave, res.After, s.rec.WaitingFor)
	}
	if !strings.Contains(s.rec.Message, "the next wave waits: outside the maintenance windows") {
		t.Fatalf("record message %q, want the wait said", s.rec.Message)
	}
	s.now = s.now.Add(30 * time.Minute)
	s.step("")
	if got := strings.Count(s.reasons(), ReasonWaveWaiting); got != 1 {
		t.Fatalf("events %s: want one %s while the wait is the same", s.reasons(), ReasonWaveWaiting)
	}

	s.now = s.now.Add(30 * time.Minute) // 13:00: open
	s.step("")
	if s.rec.Wave != 0 || s.rec.WaitingFor != "" {
		t.Fatalf("in the window: wave %d, waiting for %q; want the canary wave started", s.rec.Wave, s.rec.WaitingFor)
	}
	s.converge("canary/a")
	s.step("")
	s.now = s.now.Add(time.Hour) // 14:00: the canary soaked, the window closed
	res = s.step("")
	if s.rec.Wave != 0 || !strings.Contains(s.rec.WaitingFor, "the next opens at 2026-01-02T13:00:00Z") || res.After != 23*time.Hour {
		t.Fatalf("after the window: wave %d, waiting for %q, after %s; want the rest wave waiting for tomorrow's window", s.rec.Wave, s.rec.WaitingFor, res.After)
	}
	if s.group("team-b/b").AtTarget {
		t.Fatal("team-b/b moved outside the window")
	}
	s.now = s.now.Add(23 * time.Hour)
	s.step("")
	if s.rec.Wave != 1 || !s.group("team-b/b").AtTarget {
		t.Fatalf("in the next window: wave %d; want the rest wave started", s.rec.Wave)
	}
}
