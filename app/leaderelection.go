package app

import (
	"fmt"
	"time"
)

// Defaults of the leader election timings (controller-runtime's).
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// checkLeaderElection refuses leader election timings the election cannot
// work with: the leader must renew (every RetryPeriod) well before it
// gives up (RenewDeadline), and give up before the others take the Lease
// (LeaseDuration), or two replicas could reconcile at once. Zero means
// the default. The error names the flags and what would be valid.
func (o *Options) checkLeaderElection() error {
	if o.LeaseDuration < 0 || o.RenewDeadline < 0 || o.RetryPeriod < 0 {
		return fmt.Errorf("--leader-election-lease-duration=%s, --leader-election-renew-deadline=%s, --leader-election-retry-period=%s: durations must be positive (0: the defaults %s, %s, %s)",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, defaultLeaseDuration, defaultRenewDeadline, defaultRetryPeriod)
	}
	lease, renew, retry := orDuration(o.LeaseDuration, defaultLeaseDuration), orDuration(o.RenewDeadline, defaultRenewDeadline), orDuration(o.RetryPeriod, defaultRetryPeriod)
	switch {
	case lease <= renew:
		return fmt.Errorf("--leader-election-lease-duration=%s must be longer than --leader-election-renew-deadline=%s, or a replica could take the Lease while the leader still reconciles", lease, renew)
	case renew <= retry:
		return fmt.Errorf("--leader-election-renew-deadline=%s must be longer than --leader-election-retry-period=%s, or the leader gives up before it retried a renewal", renew, retry)
	}
	return nil
}

// nonZero is nil for zero (controller-runtime's default), else &d.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
