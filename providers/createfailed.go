package providers

import (
	"sync"
	"time"
)

// ReasonCreateFailed: an EKS node group or Fargate profile ended in
// CREATE_FAILED; it is deleted and created again with backoff
// (CreateFailures), and the Event carries the health issues EKS reports.
const ReasonCreateFailed = "CreateFailed"

// CreateFailures paces the re-creation of cloud resources that ended in
// CREATE_FAILED (EKS node groups, Fargate profiles: EKS never retries
// them): each failed incarnation of a resource, told apart by its creation
// time, waits Backoff before it is deleted to be created again, doubling
// from Base up to Max per consecutive failure. The zero value is ready
// (Base 30 s, Max 15 min). Kept in memory: a restarted controller starts
// the count again.
type CreateFailures struct {
	Base, Max time.Duration
	Now       func() time.Time

	mu sync.Mutex
	m  map[string]*createFailure
}

type createFailure struct {
	createdAt time.Time // of the failed incarnation last seen
	seen      time.Time // when it was first seen failed
	attempts  int       // failed incarnations in a row
}

// Observe records that the resource key (e.g. "<cluster>/<name>") created
// at createdAt is in CREATE_FAILED. first is true the first time this
// incarnation is seen (say so then, once); wait is how long to leave it
// before deleting it (0: now), and attempt counts the failed incarnations
// in a row, this one included.
func (c *CreateFailures) Observe(key string, createdAt time.Time) (first bool, wait time.Duration, attempt int) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	base, ceiling := c.Base, c.Max
	if base <= 0 {
		base = 30 * time.Second
	}
	if ceiling <= 0 {
		ceiling = 15 * time.Minute
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*createFailure{}
	}
	f, ok := c.m[key]
	if !ok || !f.createdAt.Equal(createdAt) {
		if !ok {
			f = &createFailure{}
			c.m[key] = f
		}
		f.createdAt, f.seen, f.attempts, first = createdAt, now(), f.attempts+1, true
	}
	backoff := base
	for i := 1; i < f.attempts && backoff < ceiling; i++ {
		backoff *= 2
	}
	backoff = min(backoff, ceiling)
	return first, max(0, f.seen.Add(backoff).Sub(now())), f.attempts
}

// Forget ends key's count: the resource was created (it is ACTIVE).
func (c *CreateFailures) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
