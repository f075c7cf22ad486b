package drain

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// steps is a scripted drain step: each node's steps block until released
// and report what the script says; it records how many steps run at once,
// in total and per group.
type steps struct {
	mu       sync.Mutex
	group    map[string]string // node -> group name
	running  map[string]int    // group -> running steps
	total    int
	maxTotal int
	maxGroup map[string]int
	calls    map[string]int
	outcome  func(node string, call int) DrainResult
	hold     chan struct{} // each step waits for a receive, or its ctx
	canceled map[string]int
}

func newSteps(outcome func(string, int) DrainResult) *steps {
	return &steps{group: map[string]string{}, running: map[string]int{}, maxGroup: map[string]int{}, calls: map[string]int{},
		canceled: map[string]int{}, outcome: outcome, hold: make(chan struct{})}
}

func (s *steps) run(ctx context.Context, node string) (DrainResult, string, error) {
	s.mu.Lock()
	g := s.group[node]
	s.calls[node]++
	call := s.calls[node]
	s.running[g]++
	s.total++
	s.maxTotal = max(s.maxTotal, s.total)
	s.maxGroup[g] = max(s.maxGroup[g], s.running[g])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running[g]--
		s.total--
		s.mu.Unlock()
	}()
	select {
	case <-s.hold:
	case <-ctx.Done():
		s.mu.Lock()
		s.canceled[node]++
		s.mu.Unlock()
		return Draining, "", nil
	}
	return s.outcome(node, call), fmt.Sprintf("step %d of %s", call, node), nil
}

func (s *steps) callsOf(node string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[node]
}

func nodeNamed(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func startDrains(t *testing.T, d *Drains) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitPoll polls node until it reports an outcome other than Draining.
func waitPoll(t *testing.T, d *Drains, group types.NamespacedName, node string, release func()) (DrainResult, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, msg, err := d.Poll(context.Background(), group, nodeNamed(node))
		if err != nil {
			t.Fatal(err)
		}
		if res != Draining {
			return res, msg
		}
		if release != nil {
			release()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("drain of %s never ended", node)
	return Draining, ""
}

// The cluster-wide and per-group caps hold while many groups drain, and
// every drain finishes.
func TestDrainsConcurrencyBounds(t *testing.T) {
	cases := []struct {
		name          string
		max, perGroup int
		groups, nodes int
		wantTotal     int // most steps at once, when every slot fills
		wantPerGroup  int
	}{
		{"cluster-wide cap", 3, 0, 4, 2, 3, 2},
		{"per-group cap", 10, 1, 3, 3, 3, 1},
		{"both", 4, 2, 3, 3, 4, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSteps(func(string, int) DrainResult { return Drained })
			d := &Drains{Max: tc.max, PerGroup: tc.perGroup, Interval: time.Millisecond, stepFn: s.run}
			startDrains(t, d)
			var all []string
			for g := range tc.groups {
				for n := range tc.nodes {
					node := fmt.Sprintf("g%d-n%d", g, n)
					s.mu.Lock()
					s.group[node] = fmt.Sprintf("g%d", g)
					s.mu.Unlock()
					all = append(all, node)
					d.Poll(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("g%d", g)}, nodeNamed(node))
				}
			}
			// Let every slot fill before releasing any step.
			deadline := time.Now().Add(5 * time.Second)
			for {
				s.mu.Lock()
				total := s.total
				s.mu.Unlock()
				if total == tc.wantTotal || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // a step over the cap would start now
			for _, node := range all {
				res, _ := waitPoll(t, d, types.NamespacedName{Namespace: "ns", Name: s.group[node]}, node, func() {
					select {
					case s.hold <- struct{}{}:
					default:
					}
				})
				if res != Drained {
					t.Errorf("%s: %v, want Drained", node, res)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.maxTotal != tc.wantTotal {
				t.Errorf("at most %d steps ran at once, want %d (the cap, filled)", s.maxTotal, tc.wantTotal)
			}
			for g, n := range s.maxGroup {
				if n > tc.wantPerGroup {
					t.Errorf("group %s ran %d steps at once, cap %d", g, n, tc.wantPerGroup)
				}
			}
		})
	}
}

// A node already draining is not drained twice: polls of it read the one
// drain, and its outcome is handed out once.
func TestDrainsDedupeNodeAlreadyDraining(t *testing.T) {
	s := newSteps(func(_ string, call int) DrainResult {
		if call < 3 {
			return Draining
		}
		return Drained
	})
	d := &Drains{Max: 5, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	g := types.NamespacedName{Namespace: "ns", Name: "a"}
	for range 5 {
		d.Poll(context.Background(), g, nodeNamed("n1"))
		d.Poll(context.Background(), types.NamespacedName{Namespace: "ns", Name: "other"}, nodeNamed("n1"))
	}
	release := func() {
		select {
		case s.hold <- struct{}{}:
		default:
		}
	}
	res, msg := waitPoll(t, d, g, "n1", release)
	if res != Drained || msg != "step 3 of n1" {
		t.Fatalf("outcome %v %q, want Drained after 3 steps", res, msg)
	}
	s.mu.Lock()
	if s.maxTotal != 1 {
		t.Errorf("%d steps of one node ran at once, want 1", s.maxTotal)
	}
	s.mu.Unlock()
	if n := s.callsOf("n1"); n != 3 {
		t.Errorf("%d steps ran, want 3 (one drain)", n)
	}
	if got := d.Draining(g); len(got) != 0 {
		t.Errorf("after its outcome was read, still draining %v", got)
	}
	// Drained is kept until Retain drops it: no new drain starts.
	if res, _, _ := d.Poll(context.Background(), g, nodeNamed("n1")); res != Drained {
		t.Errorf("a drained node polled again: %v, want Drained", res)
	}
	d.Retain(g, nil)
	if res, _, _ := d.Poll(context.Background(), g, nodeNamed("n1")); res != Draining {
		t.Errorf("after Retain dropped it: %v, want a new drain (Draining)", res)
	}
}

// Cancel (the group is gone) interrupts its running drain and drops its
// queued ones; Retain drops the drains of nodes no longer draining; other
// groups' drains go on.
func TestDrainsCancellation(t *testing.T) {
	s := newSteps(func(string, int) DrainResult { return Drained })
	d := &Drains{Max: 1, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	s.group["a1"], s.group["a2"], s.group["b1"] = "a", "a", "b"
	d.Poll(context.Background(), a, nodeNamed("a1"))
	waitFor(t, func() bool { return s.callsOf("a1") == 1 })
	d.Poll(context.Background(), a, nodeNamed("a2"))
	d.Poll(context.Background(), b, nodeNamed("b1"))
	d.Cancel(a)
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.canceled["a1"] == 1 })
	if got := d.Draining(a); len(got) != 0 {
		t.Errorf("group a still draining %v after Cancel", got)
	}
	res, _ := waitPoll(t, d, b, "b1", func() {
		select {
		case s.hold <- struct{}{}:
		default:
		}
	})
	if res != Drained {
		t.Errorf("b1: %v, want Drained", res)
	}
	if n := s.callsOf("a2"); n != 0 {
		t.Errorf("a2 drained %d times after its group was cancelled", n)
	}

	d.Poll(context.Background(), b, nodeNamed("b2"))
	d.Poll(context.Background(), b, nodeNamed("b3"))
	d.Retain(b, []string{"b3"})
	if got := d.Draining(b); len(got) != 1 || got[0] != "b3" {
		t.Errorf("after Retain(b3): draining %v, want [b3]", got)
	}
}

// A drain blocked for good takes turns with the others instead of holding
// the only slot; its group gets the outcome on Finished.
func TestDrainsBlockedDrainDoesNotStarveOthers(t *testing.T) {
	s := newSteps(func(node string, call int) DrainResult {
		if node == "stuck" {
			return Draining
		}
		return Drained
	})
	close(s.hold) // steps do not wait
	d := &Drains{Max: 1, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	stuck, other := types.NamespacedName{Namespace: "ns", Name: "stuck"}, types.NamespacedName{Namespace: "ns", Name: "other"}
	d.Poll(context.Background(), stuck, nodeNamed("stuck"))
	waitFor(t, func() bool { return s.callsOf("stuck") >= 2 })
	d.Poll(context.Background(), other, nodeNamed("free"))
	if res, _ := waitPoll(t, d, other, "free", nil); res != Drained {
		t.Fatalf("free: %v, want Drained", res)
	}
	select {
	case e := <-d.Finished():
		if e.Object != other {
			t.Errorf("Finished sent %v, want %v", e.Object, other)
		}
	case <-time.After(5 * time.Second):
		t.Error("no Finished event for the group whose drain ended")
	}
	if got := d.Draining(stuck); len(got) != 1 {
		t.Errorf("the stuck drain should still be under way: %v", got)
	}
}

// A node deleted while draining has nothing left to evict: the real step
// reports it Drained.
func TestDrainsNodeGone(t *testing.T) {
	d := &Drains{Max: 1, Drainer: &Drainer{Kube: kubefake.NewSimpleClientset(), Client: nodeClient(t),
		Timeout: time.Minute, Step: time.Second, Now: time.Now}}
	startDrains(t, d)
	g := types.NamespacedName{Namespace: "ns", Name: "a"}
	if res, _ := waitPoll(t, d, g, "gone", nil); res != Drained {
		t.Errorf("drain of a node that is gone: %v, want Drained", res)
	}
}

// Poll before Start queues; nothing runs until the dispatcher starts.
func TestDrainsPollBeforeStart(t *testing.T) {
	s := newSteps(func(string, int) DrainResult { return Drained })
	close(s.hold)
	d := &Drains{Max: 1, stepFn: s.run}
	g := types.NamespacedName{Namespace: "ns", Name: "a"}
	if res, _, _ := d.Poll(context.Background(), g, nodeNamed("n")); res != Draining {
		t.Fatalf("first poll: %v, want Draining", res)
	}
	time.Sleep(20 * time.Millisecond)
	if n := s.callsOf("n"); n != 0 {
		t.Fatalf("%d steps ran before Start", n)
	}
	startDrains(t, d)
	if res, _ := waitPoll(t, d, g, "n", nil); res != Drained {
		t.Errorf("after Start: %v, want Drained", res)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Stop ends the drains of the named nodes, whichever group started them,
// interrupting a running step; the other drains go on.
func TestDrainsStop(t *testing.T) {
	s := newSteps(func(string, int) DrainResult { return Draining })
	d := &Drains{Max: 5, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	s.group["a1"], s.group["a2"], s.group["b1"] = "a", "a", "b"
	d.Poll(context.Background(), a, nodeNamed("a1"))
	d.Poll(context.Background(), a, nodeNamed("a2"))
	d.Poll(context.Background(), b, nodeNamed("b1"))
	waitFor(t, func() bool { return s.callsOf("a1") == 1 && s.callsOf("b1") == 1 })
	d.Stop("a1", "b1", "never-drained")
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.canceled["a1"] == 1 && s.canceled["b1"] == 1 })
	if got := d.Draining(a); len(got) != 1 || got[0] != "a2" {
		t.Errorf("group a draining %v after Stop(a1), want [a2]", got)
	}
	if got := d.Draining(b); len(got) != 0 {
		t.Errorf("group b draining %v after Stop(b1), want none", got)
	}
}

// A drain whose node lost its drain annotation (uncordoned by Skip) ends
// at its next step without evicting anything.
func TestDrainsEndWhenTheNodeIsNoLongerDraining(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	srv := fakeeviction.New(time.Now, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }, pod, nodeNamed("n1"))
	d := &Drains{Max: 1, Interval: time.Millisecond,
		Drainer: &Drainer{Kube: srv.Kube, Client: nodeClient(t, nodeNamed("n1")), Timeout: time.Minute, Step: time.Second, Now: time.Now}}
	startDrains(t, d)
	g := types.NamespacedName{Namespace: "ns", Name: "a"}
	d.Poll(context.Background(), g, nodeNamed("n1"))
	waitFor(t, func() bool { return len(d.Draining(g)) == 0 })
	if n := srv.Evictions("apps/web-1"); n != 0 {
		t.Errorf("%d eviction(s) from a node not marked for a drain", n)
	}
}

// nodeClient is a fake controller-runtime client holding nodes.
func nodeClient(t *testing.T, nodes ...*corev1.Node) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, n := range nodes {
		b = b.WithObjects(n)
	}
	return b.Build()
}

// A held drain (the termination controller's) outlives the group's
// Retain and Cancel; Stop ends it.
func TestDrainsHeldOutlivesRetainAndCancel(t *testing.T) {
	s := newSteps(func(string, int) DrainResult { return Draining })
	d := &Drains{Max: 5, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	s.group["rotated"], s.group["leaving"] = "a", "a"
	d.Poll(context.Background(), a, nodeNamed("rotated"))
	d.PollHeld(context.Background(), a, nodeNamed("leaving"))
	waitFor(t, func() bool { return s.callsOf("rotated") == 1 && s.callsOf("leaving") == 1 })
	d.Retain(a, nil)
	if got := d.Draining(a); len(got) != 1 || got[0] != "leaving" {
		t.Errorf("draining %v after Retain(a, none), want [leaving]: the held drain stays", got)
	}
	d.Cancel(a)
	if got := d.Draining(a); len(got) != 1 || got[0] != "leaving" {
		t.Errorf("draining %v after Cancel(a), want [leaving]", got)
	}
	d.Stop("leaving")
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.canceled["leaving"] == 1 })
	if got := d.Draining(a); len(got) != 0 {
		t.Errorf("draining %v after Stop(leaving), want none", got)
	}
}

// A drain racing EC2 or Auto Scaling (an interruption's, a termination
// hook's) does not wait behind rotation and deletion drains: with every
// slot taken and others queued before it, it starts at once on the slot
// kept for such drains, and that slot is not used by the others (review
// N15).
func TestDrainsUrgentDrainsStepFirst(t *testing.T) {
	s := newSteps(func(string, int) DrainResult { return Drained })
	d := &Drains{Max: 2, PerGroup: 1, Interval: time.Millisecond, stepFn: s.run}
	startDrains(t, d)
	ctx := context.Background()
	g := types.NamespacedName{Namespace: "ns", Name: "g"}
	s.mu.Lock()
	s.group["spot"], s.group["g-rot"] = "g", "g"
	s.mu.Unlock()
	// Both slots taken, one of them by g's own rotation (g's only
	// per-group slot); rot-3 queued before the interruption arrives.
	d.Poll(ctx, types.NamespacedName{Namespace: "ns", Name: "other"}, nodeNamed("rot-1"))
	d.Poll(ctx, g, nodeNamed("g-rot"))
	waitFor(t, func() bool { return s.callsOf("rot-1") == 1 && s.callsOf("g-rot") == 1 })
	d.Poll(ctx, types.NamespacedName{Namespace: "ns", Name: "third"}, nodeNamed("rot-3"))
	spot := nodeNamed("spot")
	spot.Annotations = map[string]string{AnnotationDrainStarted: "2026-11-29T09:00:00Z", AnnotationDrainOwner: string(OwnerInterruption)}
	d.PollHeld(ctx, g, spot)
	waitFor(t, func() bool { return s.callsOf("spot") == 1 })
	time.Sleep(20 * time.Millisecond)
	if got := s.callsOf("rot-3"); got != 0 {
		t.Errorf("rot-3 took the slot kept for urgent drains (%d steps)", got)
	}
	s.mu.Lock()
	if s.total != 3 {
		t.Errorf("%d steps at once, want Max 2 + the urgent one", s.total)
	}
	s.mu.Unlock()
}
