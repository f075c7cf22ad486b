package upgrade

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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
		name:      "a pending replacement gone before it joined (the cluster-autoscaler's cleanup) never joined; nothing else to claim",
		rec:       v1alpha1.RotationBatch{Owed: 1, Pending: []string{"i-a"}},
		instances: []providers.Instance{inst("i-old", false, since.Add(-time.Hour))},
		want:      v1alpha1.RotationBatch{Owed: 1, NeverJoined: []string{"i-a"}},
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
			settleBatch(rec, &providers.Observation{Instances: tc.instances}, tc.nodes, now, 15*time.Minute)
			if !equalBatch(*rec, tc.want) {
				t.Errorf("got %+v, want %+v", *rec, tc.want)
			}
		})
	}
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

// A replacement the cluster-autoscaler removes with a decrement before it
// joined (its cleanup of unregistered nodes) does not let the next batch
// start: the group's totals match its lowered desired capacity, but the
// batch's own replacement never became a Ready node. Before, each such
// cycle drained and terminated one more good node.
func TestAReplacementRemovedBeforeJoiningStartsNoBatch(t *testing.T) {
	r := neverJoining(t, time.Hour) // only the removal tells it never joined
	removed := 0
	r.between = func(int) {
		for _, in := range r.group.instances {
			if strings.HasPrefix(in.ID, "i-new") {
				r.group.scaleIn(in.ID) // the autoscaler: terminate with a decrement
				removed++
				return
			}
		}
	}
	var last Progress
	for i := range 20 {
		r.between(i)
		last = r.step()
	}
	if removed == 0 {
		t.Fatal("no replacement was launched")
	}
	if got := r.oldTerminated(); len(got) != 1 {
		t.Errorf("old instances terminated %v: want only the first batch's", got)
	}
	if !strings.Contains(last.Message, "waiting for this batch's replacements") || last.Stopped {
		t.Errorf("last progress %+v: want waiting for the batch's replacement", last)
	}
	for _, n := range r.nodes() {
		if n.Spec.Unschedulable {
			t.Errorf("node %s cordoned: no second batch may start", n.Name)
		}
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
