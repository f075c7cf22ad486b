package upgrade

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func TestSettleBatch(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	since := now.Add(-5 * time.Minute)
	inst := func(id string, upToDate bool, launched time.Time) providers.Instance {
		return providers.Instance{ID: id, ProviderID: "aws:///z/" + id, LifecycleState: "InService", UpToDate: upToDate, LaunchTime: launched}
	}
	ready := func(ids ...string) map[string]*corev1.Node {
		out := map[string]*corev1.Node{}
		for _, id := range ids {
			out["aws:///z/"+id] = &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		}
		return out
	}
	cases := []struct {
		name      string
		rec       v1alpha1.RotationBatch
		instances []providers.Instance
		nodes     map[string]*corev1.Node
		desired   int // the group's desired capacity; default: one more than it holds (a launch is due)
		want      v1alpha1.RotationBatch
	}{{
		name: "claims an up-to-date instance the group did not hold when the batch began, not one it held nor a drifted one",
		rec:  v1alpha1.RotationBatch{Owed: 1, Existing: []string{"i-before"}},
		// Launch times do not decide (EC2's clock is not the controller's).
		instances: []providers.Instance{inst("i-drifted", false, now), inst("i-before", true, since.Add(time.Minute)), inst("i-new", true, since.Add(-time.Minute))},
		want:      v1alpha1.RotationBatch{Owed: 1, Existing: []string{"i-before"}, Pending: []string{"i-new"}},
	}, {
		name:      "claims no more than it is owed, oldest launch first",
		rec:       v1alpha1.RotationBatch{Owed: 1},
		instances: []providers.Instance{inst("i-b", true, since.Add(2*time.Minute)), inst("i-a", true, since.Add(time.Minute))},
		want:      v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
	}, {
		name:      "a pending replacement with a Ready node joined and clears the never-joined count",
		rec:       v1alpha1.RotationBatch{Owed: 2, Pending: []string{"i-a"}, NeverJoined: []string{"i-x"}},
		instances: []providers.Instance{inst("i-a", true, since.Add(time.Minute))},
		nodes:     ready("i-a"),
		want:      v1alpha1.RotationBatch{Owed: 2, Joined: []string{"i-a"}, JoinedCapacity: 1},
	}, {
		name:      "a pending replacement gone before it joined never joined; the group is below its desired capacity, so another comes",
		rec:       v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour))},
		want:      v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
	}, {
		name:      "a pending replacement removed with a decrement (the cluster-autoscaler's cleanup): at the desired capacity, nothing launching, it is forgone",
		rec:       v1alpha1.RotationBatch{Owed: 2, Pending: []string{"i-a", "i-b"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour)), inst("i-b", true, now.Add(-time.Minute))},
		desired:   2,
		want:      v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-b"}, NeverJoined: []string{"i-a"}},
	}, {
		name:      "a replacement removed earlier is forgone once the instance terminating meanwhile is gone",
		rec:       v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour))},
		desired:   1,
		want:      v1alpha1.RotationBatch{Owed: 0, NeverJoined: []string{"i-a"}},
	}, {
		name: "not forgone while an instance is launching (Pending)",
		rec:  v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour)),
			{ID: "i-c", ProviderID: "aws:///z/i-c", LifecycleState: "Pending", UpToDate: false}},
		desired: 1,
		want:    v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
	}, {
		name: "not forgone while an instance is terminating (its replacement may follow)",
		rec:  v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour)),
			{ID: "i-d", ProviderID: "aws:///z/i-d", LifecycleState: "Terminating:Wait", UpToDate: false}},
		desired: 1,
		want:    v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
	}, {
		name:      "not forgone when no never-joined replacement left the group (a desired capacity read before a scale-out)",
		rec:       v1alpha1.RotationBatch{Owed: 1},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour))},
		desired:   1,
		want:      v1alpha1.RotationBatch{Owed: 1},
	}, {
		name:      "not forgone while a replacement that never joined is still in the group (node health replaces it without a decrement)",
		rec:       v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}, Pending: []string{"i-b"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour)), inst("i-b", true, now.Add(-16*time.Minute))},
		desired:   2,
		want:      v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a", "i-b"}},
	}, {
		name: "a Standby instance does not count toward the desired capacity",
		rec:  v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour)),
			{ID: "i-s", ProviderID: "aws:///z/i-s", LifecycleState: "Standby", UpToDate: false}},
		desired: 2,
		want:    v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
	}, {
		name: "a pending replacement terminating never joined; its replacement is claimed",
		rec:  v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
		instances: []providers.Instance{{ID: "i-a", ProviderID: "aws:///z/i-a", LifecycleState: "Terminating", UpToDate: true, LaunchTime: since.Add(time.Minute)},
			inst("i-b", true, since.Add(3*time.Minute))},
		want: v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-b"}, NeverJoined: []string{"i-a"}},
	}, {
		name:      "no Ready node past the startup timeout (15m) never joined, and is not claimed again",
		rec:       v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
		instances: []providers.Instance{inst("i-a", true, now.Add(-16*time.Minute))},
		want:      v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
	}, {
		name:      "no node within the startup timeout is still pending",
		rec:       v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
		instances: []providers.Instance{inst("i-a", true, now.Add(-14*time.Minute))},
		want:      v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
	}, {
		name:      "a joined replacement is not claimed twice",
		rec:       v1alpha1.RotationBatch{Owed: 2, Joined: []string{"i-a"}, JoinedCapacity: 1},
		instances: []providers.Instance{inst("i-a", true, since.Add(time.Minute)), inst("i-b", true, since.Add(2*time.Minute))},
		want:      v1alpha1.RotationBatch{Owed: 2, Joined: []string{"i-a"}, JoinedCapacity: 1, Pending: []string{"i-b"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec.DeepCopy()
			rec.Since = metav1.NewTime(since)
			tc.want.Since = rec.Since
			desired := tc.desired
			if desired == 0 {
				desired = len(tc.instances) + 1
			}
			forgone := settleBatch(rec, &providers.Observation{Desired: desired, Instances: tc.instances}, tc.nodes, now, 15*time.Minute)
			if (forgone != "") != (rec.Owed < tc.rec.Owed) {
				t.Errorf("forgone %q with owed %d -> %d", forgone, tc.rec.Owed, rec.Owed)
			}
			if !equalBatch(*rec, tc.want) {
				t.Errorf("got %+v, want %+v", *rec, tc.want)
			}
		})
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func equalBatch(a, b v1alpha1.RotationBatch) bool {
	return a.Owed == b.Owed && a.JoinedCapacity == b.JoinedCapacity && slices.Equal(a.Existing, b.Existing) && slices.Equal(a.Pending, b.Pending) &&
		slices.Equal(a.Joined, b.Joined) && slices.Equal(a.NeverJoined, b.NeverJoined)
}

// neverJoining is a rollout whose up-to-date instances never get a node,
// with the given node startup timeout.
func neverJoining(t *testing.T, startup time.Duration) *rollout {
	g := oldGroup(1, 5, 3)
	r := newRollout(t, &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, g)
	r.ig.Spec.EKS = &v1alpha1.EKSSpec{NodeHealth: &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: startup}}}
	r.noNode = func(id string) bool { return strings.HasPrefix(id, "i-new") }
	return r
}

// oldTerminated returns the old instances the rotation terminated.
func (r *rollout) oldTerminated() []string {
	var out []string
	for _, id := range r.group.terminated {
		if strings.HasPrefix(id, "i-old") {
			out = append(out, id)
		}
	}
	return out
}

// caRemovesClaimed returns a between func that plays the
// cluster-autoscaler's cleanup of unregistered nodes: it terminates, with
// a decrement, each replacement the batch record has claimed (Pending)
// that remove names, and counts them.
func (r *rollout) caRemovesClaimed(remove func(id string) bool, removed *[]string) func(int) {
	return func(int) {
		stored := &v1alpha1.InstanceGroup{}
		if err := r.kube.Get(context.Background(), client.ObjectKeyFromObject(r.ig), stored); err != nil {
			r.t.Fatal(err)
		}
		if rec := stored.Status.RotationBatch; rec != nil {
			for _, id := range rec.Pending {
				if remove(id) && !slices.Contains(*removed, id) {
					r.group.scaleIn(id)
					*removed = append(*removed, id)
				}
			}
		}
	}
}

// A replacement the cluster-autoscaler removes with a decrement before it
// joined (its cleanup of unregistered nodes) is forgone with a Warning
// naming it: Auto Scaling launches nothing for it, so the batch stops
// waiting and the rotation finishes (before, it waited for good, stalling
// and retrying). It still counts as never joined.
func TestAReplacementRemovedWithADecrementIsForgone(t *testing.T) {
	r := neverJoining(t, time.Hour)
	r.noNode = func(id string) bool { return id == "i-new1" }
	var removed []string
	r.between = r.caRemovesClaimed(func(id string) bool { return id == "i-new1" }, &removed)
	before := counterValue(t, replacementsForgone)
	r.run(40)
	if got := counterValue(t, replacementsForgone) - before; got != 1 {
		t.Errorf("replacements forgone metric rose by %v, want 1", got)
	}
	if !slices.Equal(removed, []string{"i-new1"}) {
		t.Fatalf("removed %v, want the first replacement", removed)
	}
	if got := r.oldTerminated(); len(got) != 3 {
		t.Errorf("old instances terminated %v: want all 3", got)
	}
	if r.group.desired != 2 {
		t.Errorf("desired %d, want 2 (the autoscaler's decrement kept)", r.group.desired)
	}
	found := false
	for len(r.events.Events) > 0 {
		if e := <-r.events.Events; strings.Contains(e, ReasonReplacementForgone) && strings.Contains(e, "i-new1") {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s Event naming i-new1", ReasonReplacementForgone)
	}
}

// When the cluster-autoscaler removes every replacement before it joins,
// each batch is forgone, and the rotation stops at MaxNeverJoined: the
// group loses at most that many old nodes to the cleanup.
func TestReplacementsRemovedEveryTimeStopTheRotation(t *testing.T) {
	g := oldGroup(1, 8, 5)
	r := newRollout(t, &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, g)
	r.ig.Spec.EKS = &v1alpha1.EKSSpec{NodeHealth: &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: time.Hour}}}
	r.noNode = func(id string) bool { return strings.HasPrefix(id, "i-new") }
	var removed []string
	r.between = r.caRemovesClaimed(func(string) bool { return true }, &removed)
	var last Progress
	for i := range 40 {
		r.between(i)
		if last = r.step(); last.Stopped {
			break
		}
	}
	if !last.Stopped {
		t.Fatalf("not stopped: %s", last.Message)
	}
	if got := r.oldTerminated(); len(got) != MaxNeverJoined {
		t.Errorf("old instances terminated %v: want %d", got, MaxNeverJoined)
	}
}

// Replacements that never join (node health replaces each after the
// startup timeout, without a decrement) stop the rotation at the third:
// Warning Event naming the version, Progress.Stopped, no old node drained
// after the first batch, and Stopped says so until a new version.
func TestThreeReplacementsThatNeverJoinStopTheRotation(t *testing.T) {
	r := neverJoining(t, time.Nanosecond)
	r.between = func(int) {
		for _, in := range r.group.instances {
			if strings.HasPrefix(in.ID, "i-new") && time.Since(in.LaunchTime) > time.Nanosecond {
				// Node health: terminate without a decrement.
				_ = r.group.Terminate(context.Background(), r.ig, in.ID, false)
				return
			}
		}
	}
	var last Progress
	for i := range 30 {
		r.between(i)
		if last = r.step(); last.Stopped {
			break
		}
		if i == 29 {
			t.Fatalf("not stopped: %s", last.Message)
		}
	}
	if !strings.Contains(last.Message, "rotation stopped: 3 replacement instance(s)") {
		t.Errorf("message %q", last.Message)
	}
	if !r.sawEvent(ReasonRotationStopped) {
		t.Error("no RotationStopped Event")
	}
	if got := r.oldTerminated(); len(got) != 1 {
		t.Errorf("old instances terminated %v: want only the first batch's", got)
	}
	stored := &v1alpha1.InstanceGroup{}
	if err := r.kube.Get(context.Background(), client.ObjectKeyFromObject(r.ig), stored); err != nil {
		t.Fatal(err)
	}
	obs := r.group.observation()
	if msg := Stopped(stored, obs); msg == "" {
		t.Errorf("Stopped of the stored group is empty; record %+v", stored.Status.RotationBatch)
	}
	// More steps change nothing and emit no second Event.
	for range 5 {
		if p := r.step(); !p.Stopped {
			t.Fatalf("no longer stopped: %s", p.Message)
		}
	}
	if r.sawEvent(ReasonRotationStopped) || len(r.oldTerminated()) != 1 {
		t.Error("a stopped rotation acted again")
	}
	// A new launch template version restarts it.
	obs.LatestTemplateVersion = "2"
	if Stopped(stored, obs) != "" {
		t.Error("still stopped on a new launch template version")
	}
}

// Surge is not given back while the last batch's own replacement (here a
// drained surge node replaced for balance, SurgeKeptForBalance) is not a
// Ready node yet: giving it back then left one Ready node of two (e2e
// TestMaxSurgeLaunchesBeforeDraining).
func TestSurgeIsGivenBackOnlyAfterTheBatchsReplacementsAreReady(t *testing.T) {
	g := &fakeGroup{min: 2, max: 3, desired: 3, zones: []string{"a", "b"}}
	g.addIn("a", "i-new1", 1, true) // the surge instance
	g.addIn("a", "i-new2", 1, true) // the other old node's replacement (earlier batch)
	g.addIn("b", "i-new3", 1, true) // replacement of the node kept for balance
	r := newRollout(t, surgeStrategy(1), g)
	r.notReady["i-new3"] = true
	ctx := context.Background()
	if err := r.strat.recordSurge(ctx, r.ig, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.strat.writeBatch(ctx, r.ig, &v1alpha1.RotationBatch{Owed: 1, Existing: []string{"i-new1", "i-new2"}}); err != nil {
		t.Fatal(err)
	}
	msg, err := r.strat.Settle(ctx, r.ig, g.observation(), r.nodes(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "after the last batch") {
		t.Errorf("message %q: want waiting for the last batch", msg)
	}
	for _, n := range r.nodes() {
		if n.Spec.Unschedulable {
			t.Fatalf("node %s cordoned to give surge back before the batch's replacement is Ready", n.Name)
		}
	}
	delete(r.notReady, "i-new3")
	if msg, err = r.strat.Settle(ctx, r.ig, g.observation(), r.nodes(), g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "giving back 1 capacity unit(s) of surge: draining") {
		t.Errorf("message %q once the replacement is Ready: want a give-back drain", msg)
	}
}
