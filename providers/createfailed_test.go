package providers

import (
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Each failed incarnation waits Base doubled per failure in a row, up to
// Max; the count is the stored record's, so a controller that starts
// again (a new CreateFailures and the record read back from the status)
// continues it; a record of another resource starts again.
func TestCreateFailuresBackOffPerIncarnation(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	inc := func(n int) time.Time { return time.Date(2026, 11, 26, 11, n, 0, 0, time.UTC) }
	steps := []struct {
		advance   time.Duration
		restart   bool // a new controller: a new CreateFailures, the stored record only
		name      string
		createdAt time.Time
		first     bool
		wait      time.Duration
		attempt   int
	}{
		{0, false, "ng", inc(1), true, time.Minute, 1},
		{30 * time.Second, false, "ng", inc(1), false, 30 * time.Second, 1}, // the same incarnation: no new Event
		{10 * time.Second, true, "ng", inc(1), false, 20 * time.Second, 1},  // restarted: still the same wait, not deleted at once
		{20 * time.Second, false, "ng", inc(1), false, 0, 1},                // due: delete it
		{0, false, "ng", inc(2), true, 2 * time.Minute, 2},                  // created again, failed again: doubled
		{2 * time.Minute, true, "ng", inc(2), false, 0, 2},
		{0, true, "ng", inc(3), true, 3 * time.Minute, 3}, // capped at Max, across a restart
		{0, false, "ng", inc(4), true, 3 * time.Minute, 4},
		{0, false, "other", inc(5), true, time.Minute, 1}, // another resource: its own count
	}
	var stored *v1alpha1.CreateFailure
	c := CreateFailures{Base: time.Minute, Max: 3 * time.Minute, Now: clock}
	for i, s := range steps {
		now = now.Add(s.advance)
		if s.restart {
			c = CreateFailures{Base: time.Minute, Max: 3 * time.Minute, Now: clock}
		}
		rec, first, wait := c.Observe(stored, s.name, s.createdAt)
		if first != s.first || wait != s.wait || rec.Attempts != s.attempt || rec.Name != s.name {
			t.Fatalf("step %d: Observe = %+v, %v, %s; want %s attempt %d, %v, %s", i, rec, first, wait, s.name, s.attempt, s.first, s.wait)
		}
		stored = rec
	}
}

// EKS reports creation times with sub-second precision; the status keeps
// seconds: the same incarnation read back is not a new failure.
func TestCreateFailuresComparesCreationTimeAtSecondPrecision(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c := CreateFailures{Base: time.Minute, Now: func() time.Time { return now }}
	created := time.Date(2026, 11, 26, 11, 59, 0, 123456789, time.UTC)
	rec, _, _ := c.Observe(nil, "ng", created)
	if rec2, first, _ := c.Observe(rec, "ng", created); first || rec2.Attempts != 1 {
		t.Fatalf("the same incarnation read back: first %v, attempts %d; want false, 1", first, rec2.Attempts)
	}
}
