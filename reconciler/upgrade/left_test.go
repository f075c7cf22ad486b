package upgrade

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func oneAtATime() *v1alpha1.RollingUpdateStrategy {
	return &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
}

// A drifted instance in Standby is never drained nor terminated (Auto
// Scaling would launch nothing for it); the rotation replaces the others,
// ends, and names it.
func TestStandbyInstancesAreLeftAlone(t *testing.T) {
	for _, state := range []string{"Standby", "EnteringStandby"} {
		t.Run(state, func(t *testing.T) {
			g := oldGroup(1, 5, 2)
			g.add("i-standby", 1, false)
			g.instances[2].LifecycleState = state
			r := newRollout(t, oneAtATime(), g)
			msgs := r.run(30)
			if slices.Contains(g.terminated, "i-standby") {
				t.Errorf("terminated %v: the Standby instance was rotated", g.terminated)
			}
			if len(r.oldTerminated()) != 2 {
				t.Errorf("terminated %v: want both InService old instances", g.terminated)
			}
			if last := msgs[len(msgs)-1]; !strings.Contains(last, "in Standby left alone") || !strings.Contains(last, "i-standby") {
				t.Errorf("last message %q: want the Standby instance named", last)
			}
			if n := r.nodes()["aws:///us-west-2a/i-standby"]; n.Spec.Unschedulable {
				t.Error("the Standby instance's node was cordoned")
			}
			if Rotating(r.ig, g.observation(), r.nodes(), r.strat.Drainer.Now()) {
				t.Error("Rotating with only a Standby instance drifted")
			}
		})
	}
}

// A drained instance that a fresh listing shows Terminating (someone
// else's termination) or in Standby is not terminated, and no replacement
// is owed for it.
func TestTerminateDrainedLeavesTerminatingAndStandbyInstances(t *testing.T) {
	for _, tc := range []struct{ state, reason string }{
		{"Terminating", ReasonInstanceGone},
		{"Terminating:Wait", ReasonInstanceGone},
		{"Standby", ReasonStandbyLeftAlone},
	} {
		t.Run(tc.state, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &RollingUpdate{Recorder: rec}
			in := providers.Instance{ID: "i-0a", ProviderID: "aws:///us-west-2a/i-0a", LifecycleState: "InService"}
			rot := &listedRotator{now: []providers.Instance{{ID: "i-0a", LifecycleState: tc.state}}}
			left, decremented, err := r.terminateDrained(context.Background(), &v1alpha1.InstanceGroup{}, &providers.Observation{Min: 1, Desired: 2}, in, false, 0, rot)
			if err != nil || left != 0 || decremented || len(rot.terminated) != 0 {
				t.Fatalf("terminateDrained = %d, %v, %v; terminated %v: want nothing terminated", left, decremented, err, rot.terminated)
			}
			if e := <-rec.Events; !strings.Contains(e, tc.reason) || !strings.Contains(e, "i-0a") {
				t.Errorf("event %q, want %s naming the instance", e, tc.reason)
			}
		})
	}
}

// A replaced instance held in Terminating:Wait (a user's terminate hook
// with no handler) does not hold the rotation once its node was drained
// and terminated by the rotation HeldTermination ago, or has no node; one
// the rotation terminated a moment ago (the drain hook completes it at
// once: the rotation waits for it to go), or whose node was not drained
// by the rotation, still does. After HeldTermination a Warning names it,
// once.
func TestTerminatingInstancesHeldByAHook(t *testing.T) {
	for _, tc := range []struct {
		name     string
		annotate bool
		recent   bool // terminated a minute ago, not HeldTermination ago
		noNode   bool
		done     bool
	}{
		{name: "drained and terminated by the rotation, held past HeldTermination", annotate: true, done: true},
		{name: "drained and terminated by the rotation a minute ago", annotate: true, recent: true, done: false},
		{name: "no node", noNode: true, done: true},
		{name: "node not drained by the rotation", done: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGroup{min: 2, max: 4, desired: 2}
			g.add("i-a", 1, true)
			g.add("i-b", 1, true)
			g.add("i-old", 1, false)
			g.instances[2].LifecycleState = "Terminating:Wait"
			r := newRollout(t, oneAtATime(), g)
			if tc.noNode {
				r.noNode = func(id string) bool { return id == "i-old" }
			}
			now := time.Now()
			r.strat.Drainer.Now = func() time.Time { return now }
			if tc.annotate {
				n := r.nodes()["aws:///us-west-2a/i-old"]
				at := now.Add(-HeldTermination - time.Minute)
				if tc.recent {
					at = now.Add(-time.Minute)
				}
				n.Annotations = map[string]string{AnnotationTerminated: at.UTC().Format(time.RFC3339)}
				if err := r.kube.Update(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			p := r.step()
			if p.Done != tc.done {
				t.Fatalf("done %v (%q), want %v", p.Done, p.Message, tc.done)
			}
			if got := Rotating(r.ig, g.observation(), r.nodes(), r.strat.Drainer.Now()); got == tc.done {
				t.Errorf("Rotating = %v, want %v", got, !tc.done)
			}
			r.step()
			held := 0
			for len(r.events.Events) > 0 {
				if e := <-r.events.Events; strings.Contains(e, ReasonTerminationHeld) && strings.Contains(e, "i-old") {
					held++
				}
			}
			if want := map[bool]int{true: 1}[tc.annotate && !tc.recent]; held != want {
				t.Errorf("%d %s Events, want %d", held, ReasonTerminationHeld, want)
			}
		})
	}
}

// The last batch is judged like the others: the rotation is not done
// while the last replacement is not a Ready node, and is once it is.
func TestTheLastBatchIsJudged(t *testing.T) {
	g := oldGroup(1, 5, 1)
	r := newRollout(t, oneAtATime(), g)
	var p Progress
	for i := range 10 {
		for _, in := range g.instances {
			if in.UpToDate {
				r.notReady[in.ID] = true
			}
		}
		if p = r.step(); p.Done {
			t.Fatalf("done at step %d with the last replacement not Ready", i)
		}
	}
	if !strings.Contains(p.Message, "waiting for this batch's replacements") {
		t.Errorf("message %q: want waiting for the last batch", p.Message)
	}
	if !Rotating(r.ig, g.observation(), r.nodes(), r.strat.Drainer.Now()) {
		t.Error("not Rotating while the last batch is owed")
	}
	r.notReady = map[string]bool{}
	if p = r.step(); !p.Done {
		t.Fatalf("not done once the replacement is Ready: %q", p.Message)
	}
	stored := &v1alpha1.InstanceGroup{}
	if err := r.kube.Get(context.Background(), client.ObjectKeyFromObject(r.ig), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.RotationBatch != nil {
		t.Errorf("record %+v left once settled", stored.Status.RotationBatch)
	}
}

// Replacements of the last batch that never join stop the rotation too.
func TestTheLastBatchStops(t *testing.T) {
	r := neverJoining(t, time.Nanosecond)
	r.group = oldGroup(1, 5, 1)
	r.group.t = t
	r.between = func(int) {
		for _, in := range r.group.instances {
			if strings.HasPrefix(in.ID, "i-new") {
				_ = r.group.Terminate(context.Background(), r.ig, in.ID, false) // node health
				return
			}
		}
	}
	for i := range 30 {
		r.between(i)
		p := r.step()
		if p.Stopped {
			return
		}
		if p.Done {
			t.Fatalf("done at step %d: %q", i, p.Message)
		}
	}
	t.Fatal("not stopped")
}
