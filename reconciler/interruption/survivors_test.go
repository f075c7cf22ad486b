package interruption

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// A Handler that starts with a node another process (an earlier leader)
// cordoned for an interruption resumes its drain; once drained, the node
// stays cordoned while its instance may still go, and is given back with
// an Event only when the instance survived: still InService with a Ready
// node ReleaseAfter after the drain started (review N11).
func TestInterruptionDrainsResumeAndGiveBackSurvivors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    string // the instance's lifecycle state in the listing; "": not listed
		ready    bool
		after    time.Duration // since the drain started
		released bool
	}{
		{name: "InService and Ready past the release time: given back", state: "InService", ready: true, after: 11 * time.Minute, released: true},
		{name: "before the release time: kept", state: "InService", ready: true, after: 5 * time.Minute},
		{name: "terminating: kept", state: "Terminating:Wait", ready: true, after: 11 * time.Minute},
		{name: "no longer listed: kept", ready: true, after: 11 * time.Minute},
		{name: "node not Ready (stopped): kept", state: "InService", after: 11 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, fakeeviction.Delete)
			start := time.Now()
			now := start
			w.h.Now = func() time.Time { return now }
			w.h.Drainer.Now = func() time.Time { return start }
			owners := w.h.Owners.(fakeOwners)
			wait := owners.instances["i-1"]
			wait.LifecycleState = tc.state
			owners.instances = map[string]providers.TerminationWait{}
			if tc.state != "" {
				owners.instances["i-1"] = wait
			}
			w.h.Owners = owners
			// An earlier leader cordoned n1 for an interruption and
			// handled the queue's message; this Handler has no record.
			n := &corev1.Node{}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: "n1"}, n); err != nil {
				t.Fatal(err)
			}
			if err := w.h.Drainer.Start(ctx, n, drain.OwnerInterruption); err != nil {
				t.Fatal(err)
			}
			if tc.ready {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
				if err := w.kube.Status().Update(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			w.h.Pass(ctx) // adopts n1
			deadline := time.Now().Add(5 * time.Second)
			for w.h.Tracked() > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				w.h.Pass(ctx)
			}
			if got := w.srv.Evictions("apps/web-1"); got == 0 {
				t.Fatal("the adopted drain evicted nothing")
			}
			if got := strings.Join(w.reasons(), ","); !strings.Contains(got, EventDrained) {
				t.Fatalf("events %q, want %s", got, EventDrained)
			}
			now = start.Add(tc.after)
			w.h.Pass(ctx)
			if err := w.kube.Get(ctx, client.ObjectKey{Name: "n1"}, n); err != nil {
				t.Fatal(err)
			}
			if released := !n.Spec.Unschedulable && !drain.Marked(n); released != tc.released {
				t.Errorf("released %v (unschedulable %v, annotations %v), want %v", released, n.Spec.Unschedulable, n.Annotations, tc.released)
			}
			if got := strings.Join(w.reasons(), ","); strings.Contains(got, EventSurvivorReleased) != tc.released {
				t.Errorf("events %q: %s expected %v", got, EventSurvivorReleased, tc.released)
			}
		})
	}
}
