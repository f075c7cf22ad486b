package webhooks

import (
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// keyedLimiter is a token bucket per key (a source address, a requester),
// keeping at most maxKeys buckets: the least recently used one is dropped
// first, which at worst hands a key that comes back a full bucket. A nil
// keyedLimiter allows everything. Safe for concurrent use.
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
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets.Add(key, b)
	}
	return b.(*rate.Limiter).Allow()
}
