package webhooks

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// keyedLimiter is a token bucket per key (a source address, a requester,
// a namespace), keeping at most maxKeys buckets: the least recently used
// one is dropped first, which at worst hands a key that comes back a full
// bucket (what a new key gets anyway), so memory is bounded whatever the
// number of keys. A nil keyedLimiter allows everything. Safe for
// concurrent use.
type keyedLimiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets *lru.Cache
}

// newKeyedLimiter returns a limiter of perSecond events per key with bursts
// of burst; nil (no limit) when perSecond <= 0.
func newKeyedLimiter(perSecond float64, burst, maxKeys int) *keyedLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &keyedLimiter{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: lru.New(max(maxKeys, 1))}
}

// allow takes a token from key's bucket and reports whether there was one.
func (l *keyedLimiter) allow(key string) bool {
	ok, _ := l.take(key, time.Now())
	return ok
}

// take takes a token from key's bucket at now; when there is none it takes
// nothing and says how long until one is there.
func (l *keyedLimiter) take(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets.Add(key, b)
	}
	r := b.(*rate.Limiter).ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return false, wait
	}
	return true, 0
}
