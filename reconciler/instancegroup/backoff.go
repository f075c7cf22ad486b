package instancegroup

import (
	"regexp"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// failureBackoff spaces the retries of an InstanceGroup whose reconcile
// keeps failing (a cloud error, a failed upgrade step): base, 2×base, 4×base
// … up to max, per group. A persistent error in one tenant's group then
// costs a handful of AWS calls an hour instead of throttling the account.
// The count starts again when the group's generation changes (the tenant or
// the fan-out changed its spec: worth trying at once) or a reconcile
// succeeds. Safe for concurrent use; the zero value is not usable.
type failureBackoff struct {
	base, max time.Duration
	mu        sync.Mutex
	groups    map[types.NamespacedName]failureCount
}

type failureCount struct {
	generation int64
	failures   int
	since      time.Time // the first failure of the run
	// succeeded: this process saw the group's last reconcile succeed, so
	// a stored run (status.reconcileFailures) read from a cache that has
	// not caught up with the success is not taken up again.
	succeeded bool
}

// newFailureBackoff returns a backoff from base to ceiling; zero values mean
// the defaults, 1s and 5m.
func newFailureBackoff(base, ceiling time.Duration) *failureBackoff {
	if base <= 0 {
		base = time.Second
	}
	if ceiling <= 0 {
		ceiling = 5 * time.Minute
	}
	return &failureBackoff{base: base, max: max(ceiling, base), groups: map[types.NamespacedName]failureCount{}}
}

// failed records one more failure of key at generation and returns how long
// to wait before the next attempt.
func (b *failureBackoff) failed(key types.NamespacedName, generation int64) time.Duration {
	delay, _, _ := b.record(key, generation, time.Now(), nil)
	return delay
}

// record is failed that also returns the failures of the current run (this
// one included) and when the run's first failure happened (now for the
// first): what persistence judges (see transient.go). stored is the run
// the group's status records (status.reconcileFailures, nil: none): when
// this process counted fewer failures of the same generation (it started
// after them) and has not seen the group succeed since, the run goes on
// from it.
func (b *failureBackoff) record(key types.NamespacedName, generation int64, now time.Time, stored *v1alpha1.ReconcileFailures) (time.Duration, int, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.groups[key]
	if c.generation != generation || c.failures == 0 {
		c = failureCount{generation: generation, since: now, succeeded: c.succeeded && c.generation == generation}
	}
	if stored != nil && !c.succeeded && stored.Generation == generation && stored.Attempts > c.failures {
		c.failures, c.since = stored.Attempts, stored.Since.Time
	}
	delay := b.base
	for i := 0; i < c.failures && delay < b.max; i++ {
		delay *= 2
	}
	c.failures++
	b.groups[key] = c
	return min(delay, b.max), c.failures, c.since
}

// succeeded forgets key's failures at generation.
func (b *failureBackoff) succeeded(key types.NamespacedName, generation int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.groups[key] = failureCount{generation: generation, succeeded: true}
}

// forget drops key (the group is gone).
func (b *failureBackoff) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, key)
}

// Per-call noise in error texts: AWS request ids (a new one on every call),
// the encoded message of an authorization failure (encrypted anew on every
// call) and the ephemeral local port of a failed connection.
var (
	requestIDPattern     = regexp.MustCompile(`(RequestID|HostID|request id): ?[^,\s]*,?\s*`)
	encodedAuthPattern   = regexp.MustCompile(`(Encoded authorization failure message:) ?[^\s,]+`)
	ephemeralPortPattern = regexp.MustCompile(`(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):\d+->`)
)

// stableMessage returns msg without per-call noise, for condition
// messages: a condition whose text changes on every failed call would be
// rewritten on every retry. The full text stays in the log and the Event.
func stableMessage(msg string) string {
	msg = requestIDPattern.ReplaceAllString(msg, "")
	msg = encodedAuthPattern.ReplaceAllString(msg, "$1 (see the Event)")
	return ephemeralPortPattern.ReplaceAllString(msg, "$1->")
}
