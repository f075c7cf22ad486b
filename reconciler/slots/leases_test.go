package slots_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	. "github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// clock is a settable time for the slots under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func slotScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// slotsUnderTest builds each Keeper with a cap and a per-namespace
// quota; leases also returns the fake API server's client.
type slotsUnderTest struct {
	name string
	make func(t *testing.T, c client.Client, clk *clock, max func() int, perNS func(string) int) Keeper
}

var keepers = []slotsUnderTest{
	{"memory", func(_ *testing.T, _ client.Client, clk *clock, max func() int, perNS func(string) int) Keeper {
		return &fakeslots.Slots{Max: max, PerNamespace: perNS, Now: clk.now}
	}},
	{"leases", func(_ *testing.T, c client.Client, clk *clock, max func() int, perNS func(string) int) Keeper {
		return &Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: max, PerNamespace: perNS, Now: clk.now,
			StallTimeout: 30 * time.Minute}
	}},
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)} }

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// groupsClient is the fake API server holding the InstanceGroups keys (a
// slot whose group does not exist is an orphan, freed at the cap).
func groupsClient(t *testing.T, keys ...types.NamespacedName) client.Client {
	t.Helper()
	var objs []client.Object
	for _, k := range keys {
		objs = append(objs, &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
	}
	return fake.NewClientBuilder().WithScheme(slotScheme(t)).WithObjects(objs...).Build()
}

func acquire(t *testing.T, s Keeper, k types.NamespacedName) bool {
	t.Helper()
	ok, err := s.Acquire(context.Background(), k, "")
	if err != nil {
		t.Fatalf("Acquire(%s): %v", k, err)
	}
	return ok
}

func TestSlotsCapGroupsRotatingAtOnce(t *testing.T) {
	for _, impl := range keepers {
		t.Run(impl.name, func(t *testing.T) {
			a, b, d := key("t", "a"), key("t", "b"), key("t", "c")
			c := groupsClient(t, a, b, d)
			max := 2
			s := impl.make(t, c, newClock(), func() int { return max }, nil)
			if !acquire(t, s, a) || !acquire(t, s, b) {
				t.Fatal("two slots")
			}
			if acquire(t, s, d) {
				t.Fatal("a third group got a slot with max 2")
			}
			if !acquire(t, s, a) {
				t.Fatal("a holder keeps its slot")
			}
			if err := s.Release(context.Background(), a, ReasonDone); err != nil {
				t.Fatal(err)
			}
			if !acquire(t, s, d) {
				t.Fatal("a released slot is reused")
			}
			max = 0 // no cap
			if !acquire(t, s, a) {
				t.Fatal("no cap")
			}
			if got := fmt.Sprint(s.Holders()); got != "[t/a t/b t/c]" {
				t.Errorf("Holders() = %s", got)
			}
		})
	}
}

// Many groups asking at once never get more slots than the cap.
func TestSlotsCapHoldsUnderConcurrentAcquires(t *testing.T) {
	for _, impl := range keepers {
		t.Run(impl.name, func(t *testing.T) {
			var keys []types.NamespacedName
			for i := range 20 {
				keys = append(keys, key("t", fmt.Sprint(i)))
			}
			c := groupsClient(t, keys...)
			s := impl.make(t, c, newClock(), func() int { return 3 }, nil)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := s.Acquire(context.Background(), key("t", fmt.Sprint(i)), "")
					if err != nil {
						t.Error(err)
					}
					if ok {
						mu.Lock()
						won++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if won != 3 || len(s.Holders()) != 3 {
				t.Errorf("%d groups got a slot, %d holders; cap 3", won, len(s.Holders()))
			}
		})
	}
}

func TestSlotsShareOfANamespace(t *testing.T) {
	for _, impl := range keepers {
		t.Run(impl.name, func(t *testing.T) {
			c := groupsClient(t, key("greedy", "1"), key("greedy", "2"), key("other", "1"), key("other", "2"))
			s := impl.make(t, c, newClock(), func() int { return 3 }, func(ns string) int {
				if ns == "greedy" {
					return 1
				}
				return 0
			})
			if !acquire(t, s, key("greedy", "1")) || acquire(t, s, key("greedy", "2")) {
				t.Fatal("greedy may hold one slot only")
			}
			if !acquire(t, s, key("other", "1")) || !acquire(t, s, key("other", "2")) {
				t.Fatal("the other namespaces keep the remaining slots")
			}
		})
	}
}

// Progress returns when the holder's marker last changed.
func TestSlotsProgressTime(t *testing.T) {
	for _, impl := range keepers {
		t.Run(impl.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(slotScheme(t)).Build()
			clk := newClock()
			s := impl.make(t, c, clk, func() int { return 1 }, nil)
			ctx := context.Background()
			a := key("t", "a")
			t0 := clk.now()
			progress := func(marker string) time.Time {
				t.Helper()
				at, err := s.Progress(ctx, a, marker)
				if err != nil {
					t.Fatal(err)
				}
				return at
			}
			if got := progress("0 updated, 3 drifted"); !got.Equal(t0) {
				t.Errorf("not holding: Progress = %s, want now %s", got, t0)
			}
			acquire(t, s, a)
			progress("0 updated, 3 drifted")
			clk.add(10 * time.Minute)
			if got := progress("0 updated, 3 drifted"); !got.Equal(t0) {
				t.Errorf("same progress: last change %s, want %s", got, t0)
			}
			clk.add(time.Minute)
			if got := progress("1 updated, 2 drifted"); !got.Equal(clk.now()) {
				t.Errorf("new progress: last change %s, want %s", got, clk.now())
			}
		})
	}
}

// A restarted (or newly elected) controller continues with the slots as
// the Leases hold them: the holders keep theirs, the cap still counts
// them, and the time of the last progress is kept.
func TestLeaseSlotsSurviveARestart(t *testing.T) {
	a, b, d := key("t", "a"), key("u", "b"), key("t", "c")
	c := groupsClient(t, a, b, d)
	clk := newClock()
	ctx := context.Background()
	first := keepers[1].make(t, c, clk, func() int { return 2 }, nil)
	acquire(t, first, a)
	acquire(t, first, b)
	if _, err := first.Progress(ctx, a, "1 updated, 2 drifted"); err != nil {
		t.Fatal(err)
	}
	progressed := clk.now()
	clk.add(5 * time.Minute)

	second := keepers[1].make(t, c, clk, func() int { return 2 }, nil)
	if acquire(t, second, d) {
		t.Fatal("after the restart a third group got a slot with cap 2")
	}
	if got := fmt.Sprint(second.Holders()); got != "[t/a u/b]" {
		t.Errorf("holders after the restart: %s", got)
	}
	if !acquire(t, second, a) {
		t.Fatal("a holder lost its slot in the restart")
	}
	if at, err := second.Progress(ctx, a, "1 updated, 2 drifted"); err != nil || !at.Equal(progressed) {
		t.Errorf("last progress after the restart %s (%v), want %s", at, err, progressed)
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.MatchingLabels{Label: "true"}); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 2 {
		t.Fatalf("%d slot Leases, want 2", len(leases.Items))
	}
	for _, l := range leases.Items {
		if l.Namespace != "instance-manager" || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 1800 {
			t.Errorf("Lease %s/%s: duration %v", l.Namespace, l.Name, l.Spec.LeaseDurationSeconds)
		}
	}
	if err := second.Release(ctx, a, ReasonDone); err != nil {
		t.Fatal(err)
	}
	if !acquire(t, second, d) {
		t.Fatal("the slot released after the restart is not reused")
	}
}

// A slot whose group is gone (its finalizer's release missed) or is held
// for an earlier group of the same name is freed once the cap is reached.
func TestLeaseSlotsFreeOrphans(t *testing.T) {
	live := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "live", UID: "uid-live"}}
	renamed := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "again", UID: "uid-new"}}
	c := fake.NewClientBuilder().WithScheme(slotScheme(t)).WithObjects(live, renamed).Build()
	ctx := context.Background()
	s := keepers[1].make(t, c, newClock(), func() int { return 3 }, nil).(*Leases)
	for _, g := range []struct {
		key types.NamespacedName
		uid types.UID
	}{{key("t", "live"), "uid-live"}, {key("t", "gone"), "uid-gone"}, {key("t", "again"), "uid-old"}} {
		if ok, err := s.Acquire(ctx, g.key, g.uid); err != nil || !ok {
			t.Fatalf("Acquire(%s) = %v, %v", g.key, ok, err)
		}
	}
	if ok, err := s.Acquire(ctx, key("t", "waiting"), "uid-w"); err != nil || !ok {
		t.Fatalf("a waiting group did not get an orphan's slot: %v, %v", ok, err)
	}
	if got := fmt.Sprint(s.Holders()); got != "[t/live t/waiting]" {
		t.Errorf("holders %s, want the live group and the waiting one", got)
	}
	// The new group of a reused name does not inherit the old one's slot;
	// it asks like any other.
	if ok, err := s.Acquire(ctx, key("t", "again"), "uid-new"); err != nil || !ok {
		t.Fatalf("Acquire(t/again) = %v, %v", ok, err)
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.MatchingLabels{Label: "true"}); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if *l.Spec.HolderIdentity == "t/again" && l.Annotations[AnnotationGroupUID] != "uid-new" {
			t.Errorf("t/again holds Lease %s of uid %s", l.Name, l.Annotations[AnnotationGroupUID])
		}
	}
	if len(leases.Items) != 3 {
		t.Errorf("%d Leases, want 3", len(leases.Items))
	}
}

// Two controllers writing at once (an old leader not yet stopped and the
// new one) never hold more Leases than the cap: a slot is taken by
// creating its Lease, which only one of them can.
func TestLeaseSlotsCapHoldsWithTwoWriters(t *testing.T) {
	var keys []types.NamespacedName
	for i := range 20 {
		keys = append(keys, key("t", fmt.Sprint(i)))
	}
	c := groupsClient(t, keys...)
	clk := newClock()
	writers := []Keeper{keepers[1].make(t, c, clk, func() int { return 3 }, nil), keepers[1].make(t, c, clk, func() int { return 3 }, nil)}
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 { // a loser asks again at its next pass
				if _, err := writers[i%2].Acquire(context.Background(), k, ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	leases := &coordinationv1.LeaseList{}
	if err := c.List(context.Background(), leases, client.MatchingLabels{Label: "true"}); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 3 {
		t.Errorf("%d slot Leases with cap 3", len(leases.Items))
	}
}
