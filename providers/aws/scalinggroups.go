package aws

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"golang.org/x/sync/singleflight"
)

// ClusterTagKeyPrefix starts the tag key that marks an Auto Scaling group as
// owned by instance-manager for one cluster (see ClusterTagKey).
const ClusterTagKeyPrefix = "instancemgr.keikoproj.io/cluster/"

// refreshTimeout bounds one refresh (every page, retries included). A
// refresh runs detached from its callers' contexts, so without a bound a
// hung connection would hold every later reader of the generation.
const refreshTimeout = 2 * time.Minute

// describePageSize is the largest MaxRecords DescribeAutoScalingGroups takes.
const describePageSize = 100

// ClusterTagKey returns the key of the tag that the eks provisioner puts on
// every Auto Scaling group it creates for clusterName, and by which
// ScalingGroupCache finds them: "instancemgr.keikoproj.io/cluster/<name>".
func ClusterTagKey(clusterName string) string {
	return ClusterTagKeyPrefix + clusterName
}

// ScalingGroupCache is the shared read of one cluster's Auto Scaling groups.
// Every reader is served from one listing of the groups tagged
// ClusterTagKey(cluster), refreshed at most once per TTL, so the steady-state
// cost for N InstanceGroups is one DescribeAutoScalingGroups page sequence
// per TTL instead of N calls. Concurrent readers that find the listing stale
// share one refresh. Writers call Invalidate after changing a group so the
// next read sees the change.
//
// Each listing is also compared with the one before it: the groups that
// appeared, changed (sizes, launch template, instances and their states,
// tags, ...) or disappeared in between are handed to the OnChange callback,
// so out-of-band changes are noticed from the shared listing alone.
//
// A ScalingGroupCache is safe for concurrent use. The groups it returns are
// shallow copies: change their top-level fields freely, but treat the
// slices and pointers inside (Instances, Tags, ...) as read-only.
type ScalingGroupCache struct {
	api    AutoScalingAPI
	tagKey string
	ttl    time.Duration
	now    func() time.Time // replaced by tests

	flights singleflight.Group

	mu        sync.Mutex
	listing   *groupListing // nil until the first refresh
	fetchedAt time.Time     // when the refresh that produced listing began
	fresh     bool          // false after Invalidate until the next refresh
	gen       uint64        // bumped by Invalidate
	onChange  func([]types.AutoScalingGroup)
	lastRead  time.Time // the last Get, GetWithin or List
}

// groupListing is one complete, immutable listing.
type groupListing struct {
	byName map[string]*types.AutoScalingGroup
	sorted []types.AutoScalingGroup // by name
	prints map[string]string        // fingerprint by name
	// waiting: an instance of some group is in Terminating:Wait.
	waiting bool
}

// NewScalingGroupCache returns a cache of the Auto Scaling groups tagged
// ClusterTagKey(clusterName), read through api. ttl is how long a listing
// serves reads; ttl <= 0 makes every read refresh (concurrent reads still
// share one refresh). It makes no API call.
func NewScalingGroupCache(api AutoScalingAPI, clusterName string, ttl time.Duration) *ScalingGroupCache {
	return &ScalingGroupCache{
		api:    api,
		tagKey: ClusterTagKey(clusterName),
		ttl:    ttl,
		now:    time.Now,
	}
}

// Get returns the cluster's Auto Scaling group named name, and whether it
// exists (groups being deleted are still returned, with Status set). It
// refreshes the listing first when it is older than the TTL or invalidated.
// It returns an error when that refresh fails (wrapping the
// DescribeAutoScalingGroups error) or ctx ends while waiting for it.
func (c *ScalingGroupCache) Get(ctx context.Context, name string) (*types.AutoScalingGroup, bool, error) {
	return c.GetWithin(ctx, name, c.ttl)
}

// GetWithin is Get with a listing no older than maxAge instead of the TTL:
// a group that is converging asks for a recent view, a settled one accepts
// an older one (which the periodic Refresh keeps up to date).
func (c *ScalingGroupCache) GetWithin(ctx context.Context, name string, maxAge time.Duration) (*types.AutoScalingGroup, bool, error) {
	l, err := c.current(ctx, maxAge, true)
	if err != nil {
		return nil, false, err
	}
	g, ok := l.byName[name]
	if !ok {
		return nil, false, nil
	}
	cp := *g
	return &cp, true, nil
}

// List returns all of the cluster's Auto Scaling groups, sorted by name, in
// a slice the caller owns. It refreshes and fails like Get.
func (c *ScalingGroupCache) List(ctx context.Context) ([]types.AutoScalingGroup, error) {
	l, err := c.current(ctx, c.ttl, true)
	if err != nil {
		return nil, err
	}
	return slices.Clone(l.sorted), nil
}

// Listed returns the groups of the current listing, sorted by name, in a
// slice the caller owns, and when that listing was made (the zero time and
// no groups before the first refresh). It never refreshes, makes no API
// call and does not count as a read (LastRead): the termination
// controller follows the listing the reconciles and the poll keep fresh.
func (c *ScalingGroupCache) Listed() ([]types.AutoScalingGroup, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listing == nil {
		return nil, time.Time{}
	}
	return slices.Clone(c.listing.sorted), c.fetchedAt
}

// Waiting reports whether an instance of the current listing waits in
// Terminating:Wait (a termination lifecycle hook holds it): the poll then
// lists more often, so its drain starts promptly.
func (c *ScalingGroupCache) Waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listing != nil && c.listing.waiting
}

// Invalidate makes the next read refresh. A refresh already under way when
// Invalidate is called still answers the readers waiting for it, but its
// result is not kept: it may predate the caller's write.
func (c *ScalingGroupCache) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.fresh = false
}

// Refresh lists the groups again unless the listing is younger than
// olderThan (a write's refresh may just have happened): the periodic poll of
// a cluster. It fails like Get.
func (c *ScalingGroupCache) Refresh(ctx context.Context, olderThan time.Duration) error {
	_, err := c.current(ctx, olderThan, false)
	return err
}

// LastRead is when the cache was last read (Get, GetWithin, List; not
// Refresh): the zero time when it never was.
func (c *ScalingGroupCache) LastRead() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRead
}

// OnChange sets the function called after each refresh with the groups that
// appeared or changed since the previous listing (as listed now) and those
// that disappeared (as last listed). The first listing has nothing to be
// compared with and reports nothing. fn runs on the refreshing goroutine,
// outside the cache's lock; it must not block for long.
func (c *ScalingGroupCache) OnChange(fn func(changed []types.AutoScalingGroup)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onChange = fn
}

// current returns a listing no older than maxAge, refreshing it if needed.
func (c *ScalingGroupCache) current(ctx context.Context, maxAge time.Duration, read bool) (*groupListing, error) {
	c.mu.Lock()
	if read {
		c.lastRead = c.now()
	}
	if c.fresh && c.now().Sub(c.fetchedAt) < maxAge {
		l := c.listing
		c.mu.Unlock()
		return l, nil
	}
	gen := c.gen
	c.mu.Unlock()

	// One flight per generation: readers after an Invalidate never join a
	// refresh that began before it. The flight does not inherit the
	// cancellation of the reader that started it, so that reader giving up
	// does not fail the others.
	// A flight that ended between the check above and DoChan has left a
	// fresh listing behind: the new flight serves it instead of listing
	// again.
	detached := context.WithoutCancel(ctx)
	ch := c.flights.DoChan(strconv.FormatUint(gen, 10), func() (any, error) {
		if l := c.freshListing(gen, maxAge); l != nil {
			return l, nil
		}
		return c.refresh(detached, gen)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*groupListing), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for Auto Scaling groups tagged %s: %w", c.tagKey, ctx.Err())
	}
}

// freshListing returns the listing when it is fresh, of generation gen and
// younger than maxAge; nil otherwise.
func (c *ScalingGroupCache) freshListing(gen uint64, maxAge time.Duration) *groupListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh && c.gen == gen && c.now().Sub(c.fetchedAt) < maxAge {
		return c.listing
	}
	return nil
}

// refresh lists the tagged groups (every page of DescribeAutoScalingGroups)
// and keeps the listing unless the cache was invalidated meanwhile.
func (c *ScalingGroupCache) refresh(ctx context.Context, gen uint64) (*groupListing, error) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	started := c.now()

	l := &groupListing{byName: map[string]*types.AutoScalingGroup{}}
	pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(c.api, &autoscaling.DescribeAutoScalingGroupsInput{
		Filters:    []types.Filter{{Name: awssdk.String("tag-key"), Values: []string{c.tagKey}}},
		MaxRecords: awssdk.Int32(describePageSize),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeAutoScalingGroups tagged %s: %w", c.tagKey, err)
		}
		for _, g := range page.AutoScalingGroups {
			// The filter is the server's job; checking again keeps an
			// emulator or a future API change from handing us foreign groups.
			if g.AutoScalingGroupName == nil || !hasTagKey(g.Tags, c.tagKey) {
				continue
			}
			l.sorted = append(l.sorted, g)
		}
	}
	slices.SortFunc(l.sorted, func(a, b types.AutoScalingGroup) int {
		return strings.Compare(*a.AutoScalingGroupName, *b.AutoScalingGroupName)
	})
	// A group listed twice (a page boundary moving under concurrent
	// creates) is kept once.
	l.sorted = slices.CompactFunc(l.sorted, func(a, b types.AutoScalingGroup) bool {
		return *a.AutoScalingGroupName == *b.AutoScalingGroupName
	})
	l.prints = make(map[string]string, len(l.sorted))
	for i := range l.sorted {
		l.byName[*l.sorted[i].AutoScalingGroupName] = &l.sorted[i]
		l.prints[*l.sorted[i].AutoScalingGroupName] = fingerprint(l.sorted[i])
		l.waiting = l.waiting || slices.ContainsFunc(l.sorted[i].Instances, TerminatingWait)
	}

	c.mu.Lock()
	if c.gen != gen {
		c.mu.Unlock()
		return l, nil
	}
	prev, notify := c.listing, c.onChange
	c.listing, c.fetchedAt, c.fresh = l, started, true
	c.mu.Unlock()
	if prev != nil && notify != nil {
		if changed := diff(prev, l); len(changed) > 0 {
			notify(changed)
		}
	}
	return l, nil
}

// diff returns the groups of next that are new or changed since prev, and
// those of prev that next no longer has.
func diff(prev, next *groupListing) []types.AutoScalingGroup {
	var out []types.AutoScalingGroup
	for _, g := range next.sorted {
		if prev.prints[*g.AutoScalingGroupName] != next.prints[*g.AutoScalingGroupName] {
			out = append(out, g)
		}
	}
	for _, g := range prev.sorted {
		if _, ok := next.byName[*g.AutoScalingGroupName]; !ok {
			out = append(out, g)
		}
	}
	return out
}

// fingerprint identifies what a listing says about a group: everything in
// its description, with the lists whose order means nothing sorted.
func fingerprint(g types.AutoScalingGroup) string {
	g.Instances = slices.Clone(g.Instances)
	slices.SortFunc(g.Instances, func(a, b types.Instance) int {
		return strings.Compare(awssdk.ToString(a.InstanceId), awssdk.ToString(b.InstanceId))
	})
	g.Tags = slices.Clone(g.Tags)
	slices.SortFunc(g.Tags, func(a, b types.TagDescription) int {
		return strings.Compare(awssdk.ToString(a.Key), awssdk.ToString(b.Key))
	})
	g.SuspendedProcesses = slices.Clone(g.SuspendedProcesses)
	slices.SortFunc(g.SuspendedProcesses, func(a, b types.SuspendedProcess) int {
		return strings.Compare(awssdk.ToString(a.ProcessName), awssdk.ToString(b.ProcessName))
	})
	g.EnabledMetrics = slices.Clone(g.EnabledMetrics)
	slices.SortFunc(g.EnabledMetrics, func(a, b types.EnabledMetric) int {
		return strings.Compare(awssdk.ToString(a.Metric), awssdk.ToString(b.Metric))
	})
	raw, err := json.Marshal(g)
	if err != nil {
		return "unencodable: " + err.Error() // never equal to a real fingerprint
	}
	sum := sha256.Sum256(raw)
	return string(sum[:])
}

func hasTagKey(tags []types.TagDescription, key string) bool {
	return slices.ContainsFunc(tags, func(t types.TagDescription) bool {
		return t.Key != nil && *t.Key == key
	})
}
