package aws

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	. "github.com/onsi/gomega"
)

// fakeAutoScaling serves DescribeAutoScalingGroups from memory with real
// pagination and the tag-key filter. The embedded nil interface makes any
// other method panic: the cache must not call them.
type fakeAutoScaling struct {
	AutoScalingAPI

	mu       sync.Mutex
	groups   []types.AutoScalingGroup
	pageSize int   // 0: the request's MaxRecords
	ignore   bool  // ignore Filters, as a broken emulator would
	err      error // returned by every call while set
	n        int   // calls made
	inputs   []autoscaling.DescribeAutoScalingGroupsInput
	noInputs bool // count calls only (benchmarks)

	// When gate is set, each call announces itself on entered and then
	// waits for a value on gate (or its context).
	entered chan struct{}
	gate    chan struct{}
}

func (f *fakeAutoScaling) DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	f.mu.Lock()
	f.n++
	if !f.noInputs {
		f.inputs = append(f.inputs, *in)
	}
	gate, entered := f.gate, f.entered
	f.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	size := f.pageSize
	if size == 0 {
		size = int(awssdk.ToInt32(in.MaxRecords))
	}
	// The token is the index among matching groups where the page starts.
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	matched := 0
	for _, g := range f.groups {
		if !f.ignore && !matchesFilters(g, in.Filters) {
			continue
		}
		if matched >= start && matched < start+size {
			out.AutoScalingGroups = append(out.AutoScalingGroups, g)
		}
		matched++
	}
	if start+size < matched {
		out.NextToken = awssdk.String(strconv.Itoa(start + size))
	}
	return out, nil
}

func matchesFilters(g types.AutoScalingGroup, filters []types.Filter) bool {
	for _, f := range filters {
		if awssdk.ToString(f.Name) != "tag-key" {
			panic("fake supports only the tag-key filter, got " + awssdk.ToString(f.Name))
		}
		found := false
		for _, v := range f.Values {
			found = found || hasTagKey(g.Tags, v)
		}
		if !found {
			return false
		}
	}
	return true
}

func (f *fakeAutoScaling) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeAutoScaling) set(groups ...types.AutoScalingGroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = groups
}

// waitEntered waits until a blocked call has entered the fake.
func waitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no DescribeAutoScalingGroups call was made")
	}
}

// blockCalls makes every later call wait for release (or its context).
func (f *fakeAutoScaling) blockCalls() (entered <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entered = make(chan struct{}, 100)
	f.gate = make(chan struct{})
	gate := f.gate
	return f.entered, func() { close(gate) }
}

func group(name string, desired int32, tagKeys ...string) types.AutoScalingGroup {
	g := types.AutoScalingGroup{AutoScalingGroupName: awssdk.String(name), DesiredCapacity: awssdk.Int32(desired)}
	for _, k := range tagKeys {
		g.Tags = append(g.Tags, types.TagDescription{Key: awssdk.String(k), Value: awssdk.String("owned"), ResourceId: awssdk.String(name)})
	}
	return g
}

// fakeClock is a settable clock for the cache's TTL.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const testCluster = "cluster-a"

func newTestCache(api AutoScalingAPI, ttl time.Duration) (*ScalingGroupCache, *fakeClock) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := NewScalingGroupCache(api, testCluster, ttl)
	c.now = clock.Now
	return c, clock
}

func names(groups []types.AutoScalingGroup) []string {
	var n []string
	for _, g := range groups {
		n = append(n, *g.AutoScalingGroupName)
	}
	return n
}

func TestClusterTagKey(t *testing.T) {
	NewWithT(t).Expect(ClusterTagKey("prod-1")).To(Equal("instancemgr.keikoproj.io/cluster/prod-1"))
}

func TestScalingGroupCacheServesManyGroupsFromOnePageSequence(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	var groups []types.AutoScalingGroup
	for i := range 250 {
		groups = append(groups, group(fmt.Sprintf("ig-%03d", i), 1, own))
	}
	groups = append(groups, group("other-cluster", 1, ClusterTagKey("cluster-b")), group("untagged", 1))
	api := &fakeAutoScaling{groups: groups}
	cache, _ := newTestCache(api, time.Minute)
	ctx := context.Background()

	for i := range 250 {
		name := fmt.Sprintf("ig-%03d", i)
		got, ok, err := cache.Get(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(*got.AutoScalingGroupName).To(Equal(name))
	}
	_, ok, err := cache.Get(ctx, "other-cluster")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "another cluster's group is not ours")
	all, err := cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(250))

	g.Expect(api.calls()).To(Equal(3), "250 groups are 3 pages of 100, read once for all readers")
	first := api.inputs[0]
	g.Expect(first.Filters).To(HaveLen(1))
	g.Expect(*first.Filters[0].Name).To(Equal("tag-key"))
	g.Expect(first.Filters[0].Values).To(Equal([]string{own}))
	g.Expect(*first.MaxRecords).To(Equal(int32(100)))
	g.Expect(first.NextToken).To(BeNil())
	g.Expect(*api.inputs[1].NextToken).To(Equal("100"))
	g.Expect(*api.inputs[2].NextToken).To(Equal("200"))
}

func TestScalingGroupCacheRefreshesAfterTTL(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, clock := newTestCache(api, 30*time.Second)
	ctx := context.Background()

	_, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	api.set(group("ig-a", 5, own))
	clock.Advance(29 * time.Second)
	got, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*got.DesiredCapacity).To(Equal(int32(1)), "within the TTL the listing is reused")
	g.Expect(api.calls()).To(Equal(1))

	clock.Advance(time.Second)
	got, _, err = cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*got.DesiredCapacity).To(Equal(int32(5)), "after the TTL the listing is read again")
	g.Expect(api.calls()).To(Equal(2))
}

func TestScalingGroupCacheInvalidateMakesNextReadFresh(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, time.Hour)
	ctx := context.Background()

	_, ok, err := cache.Get(ctx, "ig-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())

	api.set(group("ig-a", 1, own), group("ig-b", 2, own)) // our own write
	cache.Invalidate()
	got, ok, err := cache.Get(ctx, "ig-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(*got.DesiredCapacity).To(Equal(int32(2)))
	_, err = cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls()).To(Equal(2), "one read before, one after the invalidation")
}

func TestScalingGroupCacheConcurrentReadersShareOneRefresh(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own), group("ig-b", 2, own)}}
	cache, _ := newTestCache(api, time.Minute)
	entered, release := api.blockCalls()

	const readers = 50
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Go(func() {
			name := []string{"ig-a", "ig-b"}[i%2]
			got, ok, err := cache.Get(context.Background(), name)
			switch {
			case err != nil:
				errs <- err
			case !ok || *got.AutoScalingGroupName != name:
				errs <- fmt.Errorf("reader %d: got %v, %v for %s", i, got, ok, name)
			}
		})
	}
	waitEntered(t, entered) // the one refresh is under way; the other readers pile up behind it
	time.Sleep(20 * time.Millisecond)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	g.Expect(api.calls()).To(Equal(1))
}

func TestScalingGroupCacheInvalidateDuringRefreshStartsAnother(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, time.Hour)
	entered, release := api.blockCalls()
	ctx := context.Background()

	early := make(chan *types.AutoScalingGroup, 1)
	go func() {
		got, _, _ := cache.Get(ctx, "ig-a")
		early <- got
	}()
	waitEntered(t, entered) // a refresh has read... nothing yet, but started before the write

	api.set(group("ig-a", 7, own))
	cache.Invalidate()
	late := make(chan *types.AutoScalingGroup, 1)
	go func() {
		got, _, _ := cache.Get(ctx, "ig-a")
		late <- got
	}()
	waitEntered(t, entered) // the reader after Invalidate did not join the older refresh
	release()

	g.Expect((<-early).DesiredCapacity).NotTo(BeNil())
	g.Expect(*(<-late).DesiredCapacity).To(Equal(int32(7)))
	g.Expect(api.calls()).To(Equal(2))
}

// A refresh that began before Invalidate must not become the cached
// listing, even when it finishes last.
func TestScalingGroupCacheDiscardsRefreshOverlappingInvalidate(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, time.Hour)
	entered, release := api.blockCalls()
	ctx := context.Background()

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = cache.Get(ctx, "ig-a")
	}()
	waitEntered(t, entered)
	cache.Invalidate()
	release()
	<-done
	api.mu.Lock()
	api.gate = nil
	api.mu.Unlock()

	_, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls()).To(Equal(2), "the overlapping result was not kept as fresh")
}

func TestScalingGroupCacheReaderGivingUpDoesNotFailOthers(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, time.Minute)
	entered, release := api.blockCalls()

	impatient, cancel := context.WithCancel(context.Background())
	impatientErr := make(chan error, 1)
	go func() {
		_, _, err := cache.Get(impatient, "ig-a")
		impatientErr <- err
	}()
	waitEntered(t, entered) // the impatient reader started the refresh
	patient := make(chan error, 1)
	go func() {
		_, ok, err := cache.Get(context.Background(), "ig-a")
		if err == nil && !ok {
			err = errors.New("ig-a not found")
		}
		patient <- err
	}()
	cancel()
	err := <-impatientErr
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(err.Error()).To(ContainSubstring(ClusterTagKey(testCluster)))
	release()
	g.Expect(<-patient).To(Succeed())
	g.Expect(api.calls()).To(Equal(1))
}

func TestScalingGroupCacheReturnsAndRetriesErrors(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	boom := errors.New("connection reset")
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}, err: boom}
	cache, _ := newTestCache(api, time.Minute)
	ctx := context.Background()

	_, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).To(MatchError(boom))
	g.Expect(err.Error()).To(ContainSubstring("DescribeAutoScalingGroups"))
	g.Expect(err.Error()).To(ContainSubstring(own))
	_, err = cache.List(ctx)
	g.Expect(err).To(MatchError(boom))

	api.mu.Lock()
	api.err = nil
	api.mu.Unlock()
	_, ok, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(api.calls()).To(Equal(3), "a failure is not cached")
}

func TestScalingGroupCacheKeepsOnlyTaggedSortedUniqueGroups(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	// A server that ignores the filter, and a page boundary that moved: ig-b
	// is listed twice.
	api := &fakeAutoScaling{
		groups:   []types.AutoScalingGroup{group("ig-c", 1, own), group("ig-b", 1, own), group("untagged", 1), group("ig-b", 1, own), group("ig-a", 1, own)},
		ignore:   true,
		pageSize: 2,
	}
	cache, _ := newTestCache(api, time.Minute)

	all, err := cache.List(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(all)).To(Equal([]string{"ig-a", "ig-b", "ig-c"}))
	g.Expect(api.calls()).To(Equal(3))
}

func TestScalingGroupCacheResultsAreCallersCopies(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, time.Minute)
	ctx := context.Background()

	got, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	got.DesiredCapacity = awssdk.Int32(99)
	all, err := cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	all[0].DesiredCapacity = awssdk.Int32(98)
	all = append(all[:0], group("intruder", 1, own))

	again, _, err := cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*again.DesiredCapacity).To(Equal(int32(1)))
	list, err := cache.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(list)).To(Equal([]string{"ig-a"}))
	g.Expect(*list[0].DesiredCapacity).To(Equal(int32(1)))
	g.Expect(all).To(HaveLen(1))
}

func TestScalingGroupCacheZeroTTLReadsEveryTime(t *testing.T) {
	g := NewWithT(t)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, ClusterTagKey(testCluster))}}
	cache, _ := newTestCache(api, 0)
	for range 3 {
		_, _, err := cache.Get(context.Background(), "ig-a")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(api.calls()).To(Equal(3))
}

// BenchmarkScalingGroupCacheGet measures a cached read among 500 groups
// (the listing is fresh, so no API call is made).
func BenchmarkScalingGroupCacheGet(b *testing.B) {
	own := ClusterTagKey(testCluster)
	var groups []types.AutoScalingGroup
	for i := range 500 {
		groups = append(groups, group(fmt.Sprintf("ig-%03d", i), 1, own))
	}
	api := &fakeAutoScaling{groups: groups}
	cache := NewScalingGroupCache(api, testCluster, time.Hour)
	ctx := context.Background()
	if _, err := cache.List(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok, err := cache.Get(ctx, *groups[i%len(groups)].AutoScalingGroupName); err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.ReportMetric(float64(api.calls()), "api-calls")
}

// BenchmarkScalingGroupCacheRefresh measures one refresh of 500 groups (5
// pages) through the in-memory fake: the cache's own cost per TTL.
func BenchmarkScalingGroupCacheRefresh(b *testing.B) {
	own := ClusterTagKey(testCluster)
	var groups []types.AutoScalingGroup
	for i := range 500 {
		groups = append(groups, group(fmt.Sprintf("ig-%03d", i), 1, own))
	}
	api := &fakeAutoScaling{groups: groups, noInputs: true}
	cache := NewScalingGroupCache(api, testCluster, time.Hour)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cache.Invalidate()
		if _, _, err := cache.Get(ctx, "ig-000"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestScalingGroupCacheReportsWhatChangedBetweenListings(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	withInstances := func(gr types.AutoScalingGroup, ids ...string) types.AutoScalingGroup {
		for _, id := range ids {
			gr.Instances = append(gr.Instances, types.Instance{InstanceId: awssdk.String(id), LifecycleState: types.LifecycleStateInService})
		}
		return gr
	}
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{
		withInstances(group("ig-a", 2, own), "i-1", "i-2"), group("ig-b", 1, own), group("ig-c", 1, own)}}
	cache, clock := newTestCache(api, time.Minute)
	var reported [][]string
	cache.OnChange(func(changed []types.AutoScalingGroup) { reported = append(reported, names(changed)) })
	ctx := context.Background()

	g.Expect(cache.Refresh(ctx, time.Minute)).To(Succeed())
	g.Expect(reported).To(BeEmpty(), "the first listing has nothing to compare with")

	// Nothing changed; the same instances listed in another order.
	api.set(withInstances(group("ig-a", 2, own), "i-2", "i-1"), group("ig-b", 1, own), group("ig-c", 1, own))
	clock.Advance(time.Minute)
	g.Expect(cache.Refresh(ctx, time.Minute)).To(Succeed())
	g.Expect(reported).To(BeEmpty())

	// An instance gone from ig-a, ig-b's desired capacity changed, ig-c
	// deleted, ig-d created.
	api.set(withInstances(group("ig-a", 2, own), "i-2"), group("ig-b", 3, own), group("ig-d", 1, own))
	clock.Advance(time.Minute)
	g.Expect(cache.Refresh(ctx, time.Minute)).To(Succeed())
	g.Expect(reported).To(Equal([][]string{{"ig-a", "ig-b", "ig-d", "ig-c"}}))
}

func TestScalingGroupCacheRefreshAndGetWithinHonourTheirAge(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, clock := newTestCache(api, 30*time.Second)
	ctx := context.Background()
	g.Expect(cache.LastRead()).To(BeZero())

	g.Expect(cache.Refresh(ctx, 2*time.Minute)).To(Succeed())
	g.Expect(cache.LastRead()).To(BeZero(), "a poll is not a read")
	clock.Advance(time.Minute)
	g.Expect(cache.Refresh(ctx, 2*time.Minute)).To(Succeed())
	g.Expect(api.calls()).To(Equal(1), "a poll skips a listing younger than asked")

	_, _, err := cache.GetWithin(ctx, "ig-a", 4*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls()).To(Equal(1), "a settled group accepts a listing older than the TTL")
	g.Expect(cache.LastRead()).To(Equal(clock.Now()))
	_, _, err = cache.Get(ctx, "ig-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls()).To(Equal(2), "a converging group asks for one within the TTL")
}

// Listed and Waiting answer from the listing as it is: no call, no read.
func TestScalingGroupCacheListedAndWaitingMakeNoCall(t *testing.T) {
	g := NewWithT(t)
	own := ClusterTagKey(testCluster)
	waiting := group("ig-b", 2, own)
	waiting.Instances = []types.Instance{{InstanceId: awssdk.String("i-1"), LifecycleState: types.LifecycleStateInService},
		{InstanceId: awssdk.String("i-2"), LifecycleState: types.LifecycleStateTerminatingWait}}
	api := &fakeAutoScaling{groups: []types.AutoScalingGroup{group("ig-a", 1, own)}}
	cache, _ := newTestCache(api, 30*time.Second)
	ctx := context.Background()

	listed, at := cache.Listed()
	g.Expect(listed).To(BeEmpty())
	g.Expect(at.IsZero()).To(BeTrue())
	g.Expect(cache.Waiting()).To(BeFalse())
	g.Expect(api.calls()).To(Equal(0), "Listed never refreshes")

	g.Expect(cache.Refresh(ctx, 0)).To(Succeed())
	g.Expect(cache.Waiting()).To(BeFalse(), "no instance waits")
	api.set(group("ig-a", 1, own), waiting)
	cache.Invalidate()
	g.Expect(cache.Refresh(ctx, 0)).To(Succeed())
	listed, at = cache.Listed()
	g.Expect(listed).To(HaveLen(2))
	g.Expect(at.IsZero()).To(BeFalse())
	g.Expect(cache.Waiting()).To(BeTrue(), "i-2 is in Terminating:Wait")
	g.Expect(cache.LastRead().IsZero()).To(BeTrue(), "Listed, Waiting and Refresh are not reads")
	g.Expect(api.calls()).To(Equal(2))
}
