package providers

import (
	"testing"
	"time"
)

func TestCreateFailuresBackOffPerIncarnation(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c := &CreateFailures{Base: time.Minute, Max: 3 * time.Minute, Now: func() time.Time { return now }}
	inc := func(n int) time.Time { return time.Date(2026, 11, 26, 11, n, 0, 0, time.UTC) }
	steps := []struct {
		advance   time.Duration
		createdAt time.Time
		first     bool
		wait      time.Duration
		attempt   int
	}{
		{0, inc(1), true, time.Minute, 1},
		{30 * time.Second, inc(1), false, 30 * time.Second, 1}, // the same incarnation: no new Event
		{30 * time.Second, inc(1), false, 0, 1},                // due: delete it
		{0, inc(2), true, 2 * time.Minute, 2},                  // created again, failed again: doubled
		{2 * time.Minute, inc(2), false, 0, 2},
		{0, inc(3), true, 3 * time.Minute, 3}, // capped at Max
		{0, inc(4), true, 3 * time.Minute, 4},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		first, wait, attempt := c.Observe("prod/ng", s.createdAt)
		if first != s.first || wait != s.wait || attempt != s.attempt {
			t.Fatalf("step %d: Observe = %v, %s, %d; want %v, %s, %d", i, first, wait, attempt, s.first, s.wait, s.attempt)
		}
	}
	c.Forget("prod/ng")
	if _, wait, attempt := c.Observe("prod/ng", inc(5)); wait != time.Minute || attempt != 1 {
		t.Fatalf("after Forget: wait %s, attempt %d; want the count started again", wait, attempt)
	}
}
