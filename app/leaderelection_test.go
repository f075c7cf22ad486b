package app

import (
	"strings"
	"testing"
	"time"
)

func TestCheckLeaderElection(t *testing.T) {
	for _, tc := range []struct {
		name                string
		lease, renew, retry time.Duration
		want                string // substring of the error; "" for none
	}{
		{name: "defaults"},
		{name: "fast", lease: 6 * time.Second, renew: 4 * time.Second, retry: time.Second},
		{name: "lease only, above the default renew deadline", lease: 30 * time.Second},
		{name: "lease at the renew deadline", lease: 10 * time.Second, want: "--leader-election-lease-duration=10s must be longer than --leader-election-renew-deadline=10s"},
		{name: "renew below the retry period", lease: 6 * time.Second, renew: time.Second, retry: 2 * time.Second, want: "--leader-election-renew-deadline=1s must be longer than --leader-election-retry-period=2s"},
		{name: "negative", retry: -time.Second, want: "durations must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
			err := o.checkLeaderElection()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
