package resolve

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// lookups are the resolver's lookups of one reference, each with the
// operation it calls, a reference that exists and one that does not.
var lookups = []struct {
	name, op, found, missing string
	lookup                   func(ctx context.Context, r Resolver, ref string, fresh Fresh) error
}{
	{"subnet", "DescribeSubnets", "private-a", "private-z", func(ctx context.Context, r Resolver, ref string, fresh Fresh) error {
		_, err := r.Subnets(ctx, ref, fresh)
		return err
	}},
	{"security group", "DescribeSecurityGroups", "sg-a", "sg-z", func(ctx context.Context, r Resolver, ref string, fresh Fresh) error {
		_, err := r.SecurityGroups(ctx, ref, fresh)
		return err
	}},
	{"image", "DescribeImages", "ami-arm", "ami-gone", func(ctx context.Context, r Resolver, ref string, fresh Fresh) error {
		_, err := r.Image(ctx, ref, fresh)
		return err
	}},
	{"SSM parameter", "GetParameter", "/mine/ami", "/mine/gone", func(ctx context.Context, r Resolver, ref string, fresh Fresh) error {
		_, err := r.Parameter(ctx, ref, fresh)
		return err
	}},
}

func TestCacheCallsOncePerDistinctReferenceWhileFresh(t *testing.T) {
	steps := []struct {
		name     string
		after    time.Duration // clock advance before the lookup
		missing  bool          // look the missing reference up
		fresh    Fresh
		failWith error
		calls    int // calls of the operation so far
		notFound bool
	}{
		{name: "first lookup reads", fresh: Within(time.Minute), calls: 1},
		{name: "again within the TTL: cached", after: 59 * time.Second, fresh: Within(time.Minute), calls: 1},
		{name: "a caller accepting older answers: cached", after: 30 * time.Second, fresh: Within(time.Hour), calls: 1},
		{name: "past the TTL: read again", fresh: Within(time.Minute), calls: 2},
		{name: "a missing reference reads", missing: true, fresh: Within(time.Minute), calls: 3, notFound: true},
		{name: "a missing reference is cached", after: 30 * time.Second, missing: true, fresh: Within(time.Minute), calls: 3, notFound: true},
		{name: "unless the caller reads missing ones again", missing: true, fresh: Fresh{Found: time.Hour}, calls: 4, notFound: true},
		{name: "past the TTL, a failure", after: time.Hour, fresh: Within(time.Minute), failWith: errors.New("throttled"), calls: 5},
		{name: "a failure is not cached", fresh: Within(time.Minute), failWith: errors.New("throttled"), calls: 6},
		{name: "the next answer is", fresh: Within(time.Minute), calls: 7},
	}
	for _, l := range lookups {
		t.Run(l.name, func(t *testing.T) {
			g := NewWithT(t)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			f := newFakeCloud()
			r := Resolver{EC2: f, SSM: f, Cache: &Cache{Now: func() time.Time { return now }}}
			for _, s := range steps {
				now = now.Add(s.after)
				f.fail = s.failWith
				ref := l.found
				if s.missing {
					ref = l.missing
				}
				err := l.lookup(context.Background(), r, ref, s.fresh)
				switch {
				case s.failWith != nil:
					g.Expect(err).To(MatchError(s.failWith), s.name)
					g.Expect(err).To(MatchError(ContainSubstring(ref)), "%s: the error names the reference", s.name)
				case s.notFound:
					g.Expect(err).To(MatchError(ErrNotFound), s.name)
				default:
					g.Expect(err).NotTo(HaveOccurred(), s.name)
				}
				g.Expect(f.count(l.op)).To(Equal(s.calls), s.name)
			}
		})
	}
}

func TestCacheConcurrentCallersShareOneCall(t *testing.T) {
	for _, l := range lookups {
		t.Run(l.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeCloud()
			f.gate = make(chan struct{})
			r := Resolver{EC2: f, SSM: f, Cache: &Cache{}}
			const callers = 50
			errs := make(chan error, 2*callers)
			var wg sync.WaitGroup
			for range callers {
				for _, ref := range []string{l.found, l.missing} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs <- l.lookup(context.Background(), r, ref, Within(time.Minute))
					}()
				}
			}
			g.Eventually(f.total.Load).Should(BeEquivalentTo(2), "one call per reference in flight")
			g.Consistently(f.total.Load, 50*time.Millisecond).Should(BeEquivalentTo(2))
			close(f.gate)
			wg.Wait()
			close(errs)
			found, missing := 0, 0
			for err := range errs {
				switch {
				case err == nil:
					found++
				case errors.Is(err, ErrNotFound):
					missing++
				default:
					t.Fatal(err)
				}
			}
			g.Expect([]int{found, missing}).To(Equal([]int{callers, callers}))
			g.Expect(f.count(l.op)).To(Equal(2))
		})
	}
}

func TestCacheSweepsWhatNoCallerAccepts(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Cache{Now: func() time.Time { return now }}
	read := func(context.Context) (any, error) { return 1, nil }
	for i := range 1024 {
		_, _ = c.Do(context.Background(), "k/"+string(rune('a'+i%26))+time.Duration(i).String(), Within(time.Hour), read)
	}
	g.Expect(c.Len()).To(Equal(1024))
	now = now.Add(time.Hour)
	_, _ = c.Do(context.Background(), "k/new", Within(time.Hour), read)
	g.Expect(c.Len()).To(Equal(1), "entries older than any caller accepts are dropped")
}

func TestCacheCallerSharingACallReturnsByItsOwnDeadline(t *testing.T) {
	g := NewWithT(t)
	f := newFakeCloud()
	f.gate = make(chan struct{})
	defer close(f.gate)
	r := Resolver{EC2: f, Cache: &Cache{}}
	go func() { _, _ = r.Subnets(context.Background(), "private-a", Within(time.Hour)) }() // a slow read
	g.Eventually(f.total.Load).Should(BeEquivalentTo(1))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Subnets(ctx, "private-a", Within(time.Minute))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	g.Expect(f.total.Load()).To(BeEquivalentTo(1), "it shared the call in flight")
}
