package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
)

// The record shows each wave's pace: nodes replaced of its total, nodes
// per hour since the wave started and when, at that pace, it ends (soak
// included); time passing without progress changes nothing in the record.
func TestWavePaceAndEstimatedEnd(t *testing.T) {
	c, err := boundaries.Parse(map[string]string{"rollout": "soak: 10m\nfailure: {startupTimeout: 2h}\nwaves:\n- {name: first, percent: 50}\n"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, c.Rollout)
	for i := range s.groups {
		s.groups[i].NodesTotal, s.groups[i].NodesUpdated, s.groups[i].InService, s.groups[i].ReadyNodes = 4, 4, 4, 4
	}
	s.step("") // 12:00: the first wave (two groups, 8 nodes) starts
	w := &s.rec.Waves[0]
	if w.NodesTotal != 8 || w.NodesUpdated != 0 || w.EstimatedEnd != nil {
		t.Fatalf("at the start: %d/%d, estimate %v; want 0/8 and no estimate", w.NodesUpdated, w.NodesTotal, w.EstimatedEnd)
	}
	var moved []*Group
	for i := range s.groups {
		if g := &s.groups[i]; g.AtTarget {
			g.ObservedGeneration, g.NodesUpdated = g.Generation, 1
			moved = append(moved, g)
		}
	}
	if len(moved) != 2 {
		t.Fatalf("%d group(s) moved; want 2", len(moved))
	}
	s.step("")
	s.now = s.now.Add(30 * time.Minute)
	moved[0].NodesUpdated, moved[1].NodesUpdated = 2, 2 // 4 of 8 in 30 minutes
	s.step("")
	w = &s.rec.Waves[0]
	if w.NodesUpdated != 4 || w.NodesPerHour != 8 || w.EstimatedEnd == nil || !w.EstimatedEnd.Time.Equal(s.now.Add(30*time.Minute+10*time.Minute)) {
		t.Fatalf("after 30m: %d/%d at %d/h ending %v; want 4/8 at 8/h ending 13:10 (30m left and the 10m soak)", w.NodesUpdated, w.NodesTotal, w.NodesPerHour, w.EstimatedEnd)
	}
	if !strings.Contains(s.rec.Message, "wave 1/2 first (4/8 node(s) replaced, 8/h, ends about 2026-01-01T13:10:00Z)") {
		t.Errorf("message %q; want the pace", s.rec.Message)
	}
	before := *w.EstimatedEnd
	s.now = s.now.Add(5 * time.Minute) // no progress
	s.step("")
	if got := s.rec.Waves[0].EstimatedEnd; got == nil || !got.Equal(&before) {
		t.Errorf("time alone moved the estimate to %v (from %v): every step would write the record", got, before)
	}
}
