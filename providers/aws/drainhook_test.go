package aws

import (
	"testing"
	"time"
)

func TestDrainHookHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name        string
		drain, poll time.Duration
		want        time.Duration
	}{
		{"the drain timeout", 10 * time.Minute, 2 * time.Minute, 10 * time.Minute},
		{"the suite's 15 s drain timeout, 2 min poll", 15 * time.Second, 2 * time.Minute, 4 * time.Minute},
		{"twice a poll period longer than the drain timeout", time.Minute, 3 * time.Minute, 6 * time.Minute},
		{"below AWS's minimum", 5 * time.Second, time.Second, 30 * time.Second},
		{"above AWS's maximum", 5 * time.Hour, 2 * time.Minute, 2 * time.Hour},
		{"rounded up to whole seconds", 90*time.Second + time.Millisecond, 0, 91 * time.Second},
		{"zero", 0, 0, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DrainHookHeartbeat(tc.drain, tc.poll); got != tc.want {
				t.Errorf("DrainHookHeartbeat(%v, %v) = %v, want %v", tc.drain, tc.poll, got, tc.want)
			}
		})
	}
}
