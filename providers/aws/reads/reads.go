// Package reads is the cache of what reconciles read from AWS and wrote
// there, shared by the provisioners (one *Reads per manager), and how
// fresh a group's pass wants the references it resolves (through
// providers/aws/resolve).
package reads

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
)

// Default periods of Reads.
const (
	// DefaultCloudResync is how long what a group read from AWS is trusted
	// while its inputs do not change (Reads.TTL).
	DefaultCloudResync = time.Hour
	// DefaultFailingReread is how long it is trusted while the group's
	// reconciles fail (Reads.FailingTTL): what was read may be what fails.
	DefaultFailingReread = 5 * time.Minute
)

// Reads remembers what reconciles read from AWS and what they wrote there,
// so that a group whose inputs have not changed makes no call to learn
// them again: its IAM role, policies and instance profile, its launch
// template's latest version, its node access. Each entry is stored under
// a stage of a group with the key it was read for (a hash of the inputs
// that shaped the read); a lookup with another key misses.
//
// An entry is trusted for TTL (the long cloud resync: an out-of-band change
// to these resources, such as a policy detached by hand, is undone within
// it), and for only FailingTTL while the group's reconciles fail, since
// then what was read may be why they fail. What the group observes every
// time (its Auto Scaling group and instances) comes from the shared listing
// instead, see awsp.ScalingGroupCache. The references a group names
// (subnets, security groups, images) are resolved through Refs, shared by
// every group naming them, under the same periods (see Fresh).
//
// A Reads is safe for concurrent use.
type Reads struct {
	TTL, FailingTTL time.Duration
	Now             func() time.Time
	// Refs holds the resolved references, shared with admission when the
	// manager gives one (New makes one of its own, on Now).
	Refs *resolve.Cache

	mu      sync.Mutex
	entries map[readKey]readEntry
	failing map[types.UID]bool
	sweepAt int // entry count at which expired entries are swept
}

type readKey struct {
	group types.UID
	stage string
}

type readEntry struct {
	key string
	at  time.Time
	val any
}

// New returns a Reads trusting entries for ttl (DefaultCloudResync when
// 0) and DefaultFailingReread while a group fails.
func New(ttl time.Duration) *Reads {
	if ttl <= 0 {
		ttl = DefaultCloudResync
	}
	r := &Reads{TTL: ttl, FailingTTL: min(DefaultFailingReread, ttl), Now: time.Now}
	r.Refs = &resolve.Cache{Now: func() time.Time { return r.Now() }}
	return r
}

// Load returns the value stored for group's stage under key, if it is
// still trusted for caller (whose failing state decides how long; for a
// group's own entries caller is group).
func (r *Reads) Load(caller, group types.UID, stage, key string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[readKey{group, stage}]
	if !ok || e.key != key {
		return nil, false
	}
	ttl := r.TTL
	if r.failing[caller] {
		ttl = r.FailingTTL
	}
	if r.Now().Sub(e.at) >= ttl {
		return nil, false
	}
	return e.val, true
}

// Store keeps val for group's stage under key, read now.
func (r *Reads) Store(group types.UID, stage, key string, val any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = map[readKey]readEntry{}
	}
	now := r.Now()
	if len(r.entries) >= r.sweepAt {
		// Entries of groups long gone are no use once expired.
		for k, e := range r.entries {
			if now.Sub(e.at) >= r.TTL {
				delete(r.entries, k)
			}
		}
		r.sweepAt = 2*len(r.entries) + 1024
	}
	r.entries[readKey{group, stage}] = readEntry{key: key, at: now, val: val}
}

// Update replaces the value of group's stage, keeping when it was read,
// if an entry under key exists (what a write changed, known without a read).
func (r *Reads) Update(group types.UID, stage, key string, val any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := readKey{group, stage}
	if e, ok := r.entries[k]; ok && e.key == key {
		e.val = val
		r.entries[k] = e
	}
}

// Drop forgets group's stage.
func (r *Reads) Drop(group types.UID, stage string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, readKey{group, stage})
}

// Done records the outcome of a reconcile of group: while they fail, its
// entries (and the shared ones it uses) are trusted for FailingTTL only.
func (r *Reads) Done(group types.UID, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.failing, group)
		return
	}
	if r.failing == nil {
		r.failing = map[types.UID]bool{}
	}
	r.failing[group] = true
}

// Forget drops every entry of group (deleted).
func (r *Reads) Forget(group types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.entries {
		if k.group == group {
			delete(r.entries, k)
		}
	}
	delete(r.failing, group)
}

// Len is the number of entries (tests, memory accounting).
func (r *Reads) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Fresh is how old a resolved reference caller's pass accepts: TTL, or
// FailingTTL while caller's reconciles fail (what was read may be why
// they fail). A reference found missing is read again on every pass, so
// a tenant's fix is seen on the next reconcile.
func (r *Reads) Fresh(caller types.UID) resolve.Fresh {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing[caller] {
		return resolve.Fresh{Found: r.FailingTTL}
	}
	return resolve.Fresh{Found: r.TTL}
}

// Subnets is resolve.Resolver.SubnetIDs through api and Refs, as fresh as
// caller's pass needs (Fresh): one read per reference per TTL, whichever
// group asks. field is the spec path of refs, for the *providers.SpecError
// naming those that do not exist.
func (r *Reads) Subnets(ctx context.Context, api awsp.EC2API, caller types.UID, refs []string, field string) ([]string, error) {
	return resolve.Resolver{EC2: api, Cache: r.Refs}.SubnetIDs(ctx, refs, field, r.Fresh(caller))
}

// SecurityGroups is resolve.Resolver.SecurityGroupIDs, as Subnets.
func (r *Reads) SecurityGroups(ctx context.Context, api awsp.EC2API, caller types.UID, refs []string, field string) ([]string, error) {
	return resolve.Resolver{EC2: api, Cache: r.Refs}.SecurityGroupIDs(ctx, refs, field, r.Fresh(caller))
}
