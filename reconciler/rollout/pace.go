package rollout

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/boundaries/record"
)

// pace records how fast wave w replaces nodes: NodesUpdated of NodesTotal
// (instances on the target's launch template version, over the wave's
// groups; a group counts its updated instances once it is seen on the
// target and has observed its new spec), NodesPerHour since the wave
// started and EstimatedEnd (now + the nodes left at that pace + the
// soak). It changes the record only when the counts change, so that time
// passing alone writes nothing (a record written at every step would wake
// the step again). Under a minute after the start, or with nothing
// replaced yet, there is no pace and no estimate.
func (s *stepper) pace(w *record.Wave, byKey map[string]Group) {
	updated, total := 0, 0
	for _, m := range w.Groups {
		g, ok := byKey[m.Group]
		if !ok {
			continue
		}
		total += g.NodesTotal
		if m.MovedAt != nil && g.ObservedGeneration == g.Generation {
			updated += min(g.NodesUpdated, g.NodesTotal)
		}
	}
	if updated == w.NodesUpdated && total == w.NodesTotal {
		return
	}
	w.NodesUpdated, w.NodesTotal, w.NodesPerHour, w.EstimatedEnd = updated, total, 0, nil
	elapsed := s.in.Now.Sub(w.StartedAt.Time)
	if updated == 0 || elapsed < time.Minute {
		return
	}
	rate := float64(updated) / elapsed.Hours()
	w.NodesPerHour = int(math.Round(rate))
	left := time.Duration(float64(total-updated) / rate * float64(time.Hour))
	end := metav1.NewTime(s.in.Now.Add(left).Add(w.Soak.Duration).Truncate(time.Second))
	w.EstimatedEnd = &end
}

// paceText is the current wave's pace for the record's message: `4/8
// node(s) replaced, 8/h, ends about 2026-01-01T13:31:00Z`; "" before any.
func paceText(w record.Wave) string {
	if w.NodesTotal == 0 {
		return ""
	}
	text := fmt.Sprintf("%d/%d node(s) replaced", w.NodesUpdated, w.NodesTotal)
	if w.EstimatedEnd != nil {
		text += fmt.Sprintf(", %d/h, ends about %s", w.NodesPerHour, w.EstimatedEnd.UTC().Format(time.RFC3339))
	}
	return text
}
