package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// auditedGroup is a fakeGroup whose terminations fail the test when the
// instance has a Node that was not cordoned and drained for it first.
type auditedGroup struct {
	*fakeGroup
	kube client.Client
}

func (a *auditedGroup) Terminate(ctx context.Context, ig *v1alpha1.InstanceGroup, id string, decrement bool) error {
	n := &corev1.Node{}
	if err := a.kube.Get(ctx, client.ObjectKey{Name: id}, n); err == nil {
		if _, ok := n.Annotations[drain.AnnotationDrainStarted]; !ok || !n.Spec.Unschedulable {
			a.t.Errorf("instance %s terminated with its node neither cordoned nor drained", id)
		}
	}
	return a.fakeGroup.Terminate(ctx, ig, id, decrement)
}

// recordSurgeOf stores status.surgeCapacity as an earlier pass left it.
func (r *rollout) recordSurgeOf(surge int) {
	r.t.Helper()
	r.ig.Status.SurgeCapacity = surge
	if err := r.kube.Status().Update(context.Background(), r.ig); err != nil {
		r.t.Fatal(err)
	}
}

// settle runs one Settle pass against the audited group.
func (r *rollout) settle() string {
	r.t.Helper()
	msg, err := r.strat.Settle(context.Background(), r.ig, r.group.observation(), r.nodes(), &auditedGroup{r.group, r.kube})
	if err != nil {
		r.t.Fatalf("settle: %v", err)
	}
	return msg
}

// cordoned returns the names of the cordoned nodes marked as giving
// surge back, sorted.
func (r *rollout) cordoned() []string {
	var out []string
	for _, n := range r.nodes() {
		if n.Spec.Unschedulable && n.Annotations[drain.AnnotationSurge] == "true" {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// zonedGroup builds an up-to-date group from "zone:id" specs, in order
// (launch times increase in that order: the last is the newest).
func zonedGroup(min, max int, specs ...string) *fakeGroup {
	g := &fakeGroup{min: min, max: max, zones: []string{"a", "b", "c"}}
	for _, s := range specs {
		zone, id, _ := strings.Cut(s, ":")
		g.addIn(zone, id, 1, true)
	}
	g.desired = len(specs)
	return g
}

// Surge left over after a rotation goes back through nodes the strategy
// chooses, drains and terminates with a decrement; never by lowering the
// desired capacity (the fake fails the test if asked), never below
// minSize, and from the Availability Zone holding most of the group.
func TestSettleGivesSurgeBackThroughChosenDrainedNodes(t *testing.T) {
	cases := []struct {
		name     string
		group    *fakeGroup
		surge    int
		notReady []string
		drifted  []string
		// firstPass: the nodes the first pass cordons; desired: the
		// desired capacity at the end.
		firstPass []string
		desired   int
		forgone   bool
	}{
		{name: "the zone with most instances", group: zonedGroup(1, 10, "a:a1", "b:b1", "b:b2", "c:c1"), surge: 1,
			firstPass: []string{"b1"}, desired: 3},
		{name: "a tie goes to the zone where the surge landed", group: zonedGroup(1, 10, "a:a1", "a:a2", "b:b1", "c:c1", "b:b2"), surge: 1,
			firstPass: []string{"b1"}, desired: 4},
		{name: "in a zone, a NotReady node before the oldest", group: zonedGroup(1, 10, "a:a1", "a:a2", "a:a3", "b:b1"), surge: 1,
			notReady: []string{"a3"}, firstPass: []string{"a3"}, desired: 3},
		{name: "in a zone, a drifted instance first", group: zonedGroup(1, 10, "a:a1", "a:a2", "a:a3", "b:b1"), surge: 1,
			notReady: []string{"a3"}, drifted: []string{"a2"}, firstPass: []string{"a2"}, desired: 3},
		{name: "two units from two zones", group: zonedGroup(1, 10, "a:a1", "a:a2", "a:a3", "b:b1", "b:b2", "b:b3", "c:c1", "c:c2"), surge: 2,
			firstPass: []string{"a1", "b1"}, desired: 6},
		{name: "never below minSize", group: zonedGroup(3, 10, "a:a1", "b:b1", "c:c1"), surge: 1,
			desired: 3, forgone: true},
		{name: "only what is above minSize", group: zonedGroup(3, 10, "a:a1", "a:a2", "b:b1", "c:c1"), surge: 2,
			firstPass: []string{"a1"}, desired: 3, forgone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.group
			for i := range g.instances {
				g.instances[i].UpToDate = !slices.Contains(tc.drifted, g.instances[i].ID)
			}
			r := newRollout(t, surgeStrategy(1), g)
			for _, id := range tc.notReady {
				r.notReady[id] = true
			}
			r.recordSurgeOf(tc.surge)
			msg := r.settle()
			if got := r.cordoned(); !slices.Equal(got, tc.firstPass) {
				t.Fatalf("first pass cordoned %v, want %v (%s)", got, tc.firstPass, msg)
			}
			for i := 0; msg != ""; i++ {
				if i > 10 {
					t.Fatalf("surge not given back after 10 passes: %s", msg)
				}
				msg = r.settle()
			}
			if g.desired != tc.desired {
				t.Errorf("desired capacity %d, want %d", g.desired, tc.desired)
			}
			for _, id := range g.terminated {
				if !strings.HasSuffix(id, "+d") {
					t.Errorf("terminated %v: every give-back terminates with a decrement", g.terminated)
				}
			}
			if len(g.terminated) != len(tc.firstPass) {
				t.Errorf("terminated %v, want the nodes of the first pass %v", g.terminated, tc.firstPass)
			}
			if r.ig.Status.SurgeCapacity != 0 || r.ig.Status.SurgeReturn != nil {
				t.Errorf("record %d / %+v left, want cleared", r.ig.Status.SurgeCapacity, r.ig.Status.SurgeReturn)
			}
			if got := r.sawEvent(ReasonSurgeForgone); got != tc.forgone {
				t.Errorf("%s Event %v, want %v", ReasonSurgeForgone, got, tc.forgone)
			}
		})
	}
}

// A give-back takes several passes; a controller that restarts in between
// (a new strategy, a cached status that never saw the record) finds the
// nodes it was draining by their annotations and finishes: no second
// node is cordoned, the capacity goes back once.
func TestSettleSurvivesARestart(t *testing.T) {
	g := zonedGroup(1, 10, "a:a1", "a:a2", "b:b1", "b:b2", "c:c1")
	r := newRollout(t, surgeStrategy(1), g)
	r.recordSurgeOf(1)
	r.settle()
	first := r.cordoned()
	if len(first) != 1 {
		t.Fatalf("first pass cordoned %v, want one node", first)
	}
	// Restarted: a new strategy; the reconciler's copy shows no record.
	r.strat = &RollingUpdate{Drainer: r.strat.Drainer, Recorder: r.events, Client: r.kube}
	r.ig.Status.SurgeCapacity = 0
	if !GivingBack(g.observation(), r.nodes()) {
		t.Fatal("GivingBack is false with a node drained to give surge back: the reconciler would not call Settle")
	}
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("not settled after 10 passes")
		}
		if r.settle() == "" {
			break
		}
	}
	if want := []string{first[0] + "+d"}; !slices.Equal(g.terminated, want) {
		t.Errorf("terminated %v, want %v", g.terminated, want)
	}
	if g.desired != 4 {
		t.Errorf("desired capacity %d, want 4", g.desired)
	}
}

// The record goes down while a node drains to give it back (the
// cluster-autoscaler scaled in to minSize): the node is uncordoned, not
// terminated.
func TestSettleReleasesANodeNoLongerToGiveBack(t *testing.T) {
	g := zonedGroup(2, 10, "a:a1", "a:a2", "b:b1")
	r := newRollout(t, surgeStrategy(1), g)
	r.recordSurgeOf(1)
	r.settle()
	if got := r.cordoned(); len(got) != 1 {
		t.Fatalf("cordoned %v, want one node", got)
	}
	g.scaleIn("b1") // the autoscaler: desired 2 = minSize
	if msg := r.settle(); msg != "" {
		t.Fatalf("settle: %q, want done", msg)
	}
	for _, n := range r.nodes() {
		if n.Spec.Unschedulable {
			t.Errorf("node %s left cordoned", n.Name)
		}
	}
	if len(g.terminated) != 0 || g.desired != 2 {
		t.Errorf("terminated %v, desired %d; want nothing terminated, desired 2", g.terminated, g.desired)
	}
}

// A maxSurge rotation of a group over three zones keeps the group
// balanced: each surge instance lands in the emptiest zone and each old
// instance terminated with a decrement comes from the fullest one, so
// Auto Scaling never has a reason to rebalance (terminating undrained).
// The old instances are numbered so that rotating them by id would empty
// zone c first.
func TestSurgeRotationKeepsZonesBalanced(t *testing.T) {
	for _, surge := range []int{1, 2} {
		t.Run(fmt.Sprintf("maxSurge %d", surge), func(t *testing.T) {
			g := &fakeGroup{min: 1, max: 20, zones: []string{"a", "b", "c"}}
			for i, zone := range []string{"c", "c", "c", "b", "b", "b", "a", "a", "a"} {
				g.addIn(zone, fmt.Sprintf("i-old%d", i), 1, false)
			}
			g.desired = 9
			r := newRollout(t, surgeStrategy(surge), g)
			r.between = func(i int) {
				counts := g.zoneCounts()
				lo, hi := counts["a"], counts["a"]
				for _, z := range g.zones {
					lo, hi = min(lo, counts[z]), max(hi, counts[z])
				}
				if hi-lo > 1 {
					t.Errorf("before step %d: zones unbalanced %v", i, counts)
				}
			}
			rot := &auditedGroup{g, r.kube}
			for i := 0; ; i++ {
				if i > 200 {
					t.Fatal("not done after 200 steps")
				}
				r.between(i)
				p, err := r.strat.Step(context.Background(), r.ig, g.observation(), r.nodes(), rot)
				if err != nil {
					t.Fatal(err)
				}
				if p.Done {
					break
				}
			}
			r.checkDone(9)
		})
	}
}

// Drift appears while a give-back drains (the spec changed right after a
// rotation): the give-back under way finishes, and the drifted instance
// takes the rest of the surge; no further up-to-date node is drained for
// it.
func TestGiveBackUnderWayWhenDriftAppears(t *testing.T) {
	g := zonedGroup(1, 10, "a:a1", "a:a2", "a:a3", "b:b1", "b:b2")
	g.instances[4].UpToDate = false // b2 drifted; a holds the most, so a give-back would pick a2
	r := newRollout(t, surgeStrategy(1), g)
	r.recordSurgeOf(2)
	nodes := r.nodes()
	a1 := nodes["aws:///a/a1"]
	if err := r.strat.Drainer.Start(context.Background(), a1, drain.OwnerSurge); err != nil {
		t.Fatal(err)
	}
	rot := &auditedGroup{g, r.kube}
	for i := 0; ; i++ {
		if i > 40 {
			t.Fatal("not done after 40 steps")
		}
		for _, name := range r.cordoned() {
			if name != "a1" && name != "b2" {
				t.Fatalf("step %d: %s cordoned to give surge back; the drifted b2 was to take it", i, name)
			}
		}
		p, err := r.strat.Step(context.Background(), r.ig, g.observation(), r.nodes(), rot)
		if err != nil {
			t.Fatal(err)
		}
		if p.Done {
			break
		}
	}
	if want := []string{"a1+d", "b2+d"}; !slices.Equal(g.terminated, want) {
		t.Errorf("terminated %v, want %v", g.terminated, want)
	}
	r.checkDone(3)
}
