package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// plan fills the plan of every wave not started yet (record.Wave's
// Planned, PlannedCount, PlannedNodes, Estimate): the groups selectWave
// gives it now, after the started waves' groups and those the waves
// planned before it take. It runs at every step of a rollout not
// complete, so that the plan follows groups created, deleted or
// relabelled until the wave starts; with the same groups it gives the
// same plan, so it writes nothing new.
func (s *stepper) plan() {
	rec := s.rec
	if rec.Phase == record.PhaseComplete {
		return
	}
	taken := s.taken(rec.Wave + 1)
	perHour, from := lastPace(rec)
	for i := rec.Wave + 1; i < len(rec.Waves); i++ {
		w := &rec.Waves[i]
		keys, nodes := []string{}, 0
		for _, g := range s.selectWave(i, taken) {
			taken[g.Key] = true
			keys = append(keys, g.Key)
			nodes += g.NodesTotal
		}
		slices.Sort(keys)
		w.PlannedCount, w.PlannedNodes = len(keys), nodes
		w.Planned = nil
		if len(keys) > 0 {
			w.Planned = keys[:min(len(keys), record.MaxPlanned)]
		}
		w.Estimate = estimate(nodes, w.Soak.Duration, perHour, from)
	}
}

// lastPace is the pace (nodes replaced per hour) of the last completed
// wave that has one, and its name; 0 when none has.
func lastPace(rec *record.Record) (int, string) {
	for i := min(rec.Wave, len(rec.Waves)-1); i >= 0; i-- {
		if w := rec.Waves[i]; w.CompletedAt != nil && w.NodesPerHour > 0 {
			return w.NodesPerHour, w.Name
		}
	}
	return 0, ""
}

// estimate is how long a wave of nodes nodes should take at perHour
// nodes an hour (the pace of wave from) plus its soak, as text: `about
// 1h30m0s (40 node(s) at 27/h, the pace of wave canary, plus soak
// 10m0s)`, or why it is unknown.
func estimate(nodes int, soak time.Duration, perHour int, from string) string {
	switch {
	case nodes == 0:
		return fmt.Sprintf("about %s (no node to replace, soak %s)", soak, soak)
	case perHour == 0:
		return fmt.Sprintf("unknown until a wave completes with a measured pace (%d node(s) to replace, plus soak %s)", nodes, soak)
	}
	d := (time.Duration(float64(nodes)/float64(perHour)*float64(time.Hour)) + soak).Round(time.Minute)
	return fmt.Sprintf("about %s (%d node(s) at %d/h, the pace of wave %s, plus soak %s)", d, nodes, perHour, from, soak)
}

// changes records what the rollout changes (record.Record.Changes): the
// defaults' difference between the stable revision and the target, when
// Input.Configs knows both.
func (s *stepper) changes() {
	rec := s.rec
	old, okOld := s.in.Configs[rec.Stable]
	target, okNew := s.in.Configs[rec.Target]
	if !okOld || !okNew {
		var unknown []string
		for rev, ok := range map[string]bool{rec.Stable: okOld, rec.Target: okNew} {
			if !ok {
				unknown = append(unknown, rev)
			}
		}
		slices.Sort(unknown)
		rec.ChangesUnknown = "the boundaries of revision(s) " + strings.Join(unknown, ", ") + " were not known to the controller when the rollout started"
		return
	}
	all := boundaries.DefaultsDiff(old, target)
	rec.ChangesCount = len(all)
	for _, c := range all[:min(len(all), record.MaxChanges)] {
		rec.Changes = append(rec.Changes, record.Change{Path: c.Path, Old: cutValue(c.Old), New: cutValue(c.New)})
	}
}

// cutValue bounds a change's value to record.MaxChangeValue bytes.
func cutValue(v string) string {
	if len(v) <= record.MaxChangeValue {
		return v
	}
	return fmt.Sprintf("%s... (%d bytes)", v[:record.MaxChangeValue], len(v))
}

// changesText is the record's changes for an Event: the first few, with
// how many more.
func changesText(rec *record.Record) string {
	if rec.ChangesUnknown != "" {
		return "changes unknown: " + rec.ChangesUnknown
	}
	if rec.ChangesCount == 0 {
		return "no default changes"
	}
	const shown = 5
	var parts []string
	for _, c := range rec.Changes[:min(len(rec.Changes), shown)] {
		parts = append(parts, boundaries.FieldChange(c).String())
	}
	if rec.ChangesCount > shown {
		parts = append(parts, fmt.Sprintf("and %d more", rec.ChangesCount-shown))
	}
	return "default changes: " + strings.Join(parts, "; ")
}
