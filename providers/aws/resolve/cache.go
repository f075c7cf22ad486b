// Package resolve is the one cached resolver of the cloud references a
// spec names: subnets and security groups (ids or Name tags, to ids and
// VPCs), images (an AMI id to its architecture and owner; an SSM
// parameter, as "latest" and "ssm://" name, to an AMI id) and, through
// Cache.Do, any other lookup keyed by one reference. Admission
// (providers/aws/refcheck) and the provisioners (through
// providers/aws/reads) ask the same Cache, each saying how old an answer
// it accepts (Fresh): a boundary change seen by 2,000 groups costs one
// call per distinct reference, and a group whose reconciles fail reads
// again sooner than a Ready one.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ErrNotFound is the answer for a reference that names nothing. It is
// cached like an answer; any other error is not.
var ErrNotFound = errors.New("does not exist")

// Fresh is how old an answer a caller accepts.
type Fresh struct {
	// Found bounds the age of an answer that found the reference.
	Found time.Duration
	// Missing bounds the age of an ErrNotFound answer (0: always asked
	// again, as a provisioner does: a reference fixed by the tenant is
	// seen on the next reconcile).
	Missing time.Duration
}

// Within accepts any answer younger than d, found or not.
func Within(d time.Duration) Fresh { return Fresh{Found: d, Missing: d} }

// Cache holds one answer per distinct reference key and lets concurrent
// lookups of one key share one call. The zero value is ready; it is safe
// for concurrent use.
type Cache struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	flights singleflight.Group

	mu      sync.Mutex
	entries map[string]entry
	keep    time.Duration // the longest age any caller accepted: older entries are swept
	sweepAt int           // entry count at which expired entries are swept
}

type entry struct {
	val any
	err error // nil or ErrNotFound (wrapped)
	at  time.Time
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Do returns the answer cached for key if fresh accepts its age, or calls
// read once (shared by the concurrent callers of key) and caches its
// answer when it is a value or an error wrapping ErrNotFound. Other
// errors are returned and not cached. A caller whose ctx ends while it
// waits for a call another caller started returns ctx's error.
// Keys start with the kind of reference and a slash;
// "subnet/", "sg/", "image/" and "ssm/" are this package's own.
func (c *Cache) Do(ctx context.Context, key string, fresh Fresh, read func(context.Context) (any, error)) (any, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.keep = max(c.keep, fresh.Found, fresh.Missing)
	c.mu.Unlock()
	if ok {
		age := fresh.Found
		if e.err != nil {
			age = fresh.Missing
		}
		if now.Sub(e.at) < age {
			return e.val, e.err
		}
	}
	ch := c.flights.DoChan(key, func() (any, error) {
		v, err := read(ctx)
		if err == nil || errors.Is(err, ErrNotFound) {
			c.store(key, entry{val: v, err: err, at: c.now()})
		}
		return v, err
	})
	// A caller sharing another's call (admission behind a provisioner's
	// read that AWS throttles) still returns by its own deadline.
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s: %w", key, context.Cause(ctx))
	}
}

func (c *Cache) store(key string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]entry{}
	}
	if len(c.entries) >= c.sweepAt {
		// References no spec names any more are no use once no caller
		// would accept them.
		for k, old := range c.entries {
			if e.at.Sub(old.at) >= c.keep {
				delete(c.entries, k)
			}
		}
		c.sweepAt = 2*len(c.entries) + 1024
	}
	c.entries[key] = e
}

// Len is the number of cached answers (tests, memory accounting).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
