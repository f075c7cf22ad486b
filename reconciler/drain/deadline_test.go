package drain

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// groupClient holds the InstanceGroup team-a/web, whose drains the tests run.
func groupClient(t *testing.T) (*fake.ClientBuilder, types.NamespacedName) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "ig-uid"}}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(ig), types.NamespacedName{Namespace: "team-a", Name: "web"}
}

// drainEvents drains rec's buffered Events.
func drainEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// deleteGrace returns the grace period of the pod deletions made through kube, by pod name.
func deleteGrace(actions []clienttesting.Action) map[string]int64 {
	out := map[string]int64{}
	for _, a := range actions {
		if del, ok := a.(clienttesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			if g := del.GetDeleteOptions().GracePeriodSeconds; g != nil {
				out[del.GetName()] = *g
			}
		}
	}
	return out
}

// deletedCount reads instance_manager_drain_deadline_pods_deleted_total{reason}.
func deletedCount(t *testing.T, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := deadlineDeletions.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The admin's drain deadline (Drainer.Deadline, per group's namespace):
// until it, refusals are waited for (and never Blocked, whatever the drain
// timeout); past it, pods whose eviction is refused or fails are deleted
// with their grace period capped, and a pod terminating with a longer
// grace period is deleted again with the cap, each with a Warning Event
// naming it on the node and on the group, counted in the metric. Without
// a deadline a refusal past the drain timeout is Blocked, as before.
func TestDrainDeadline(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	const timeout, deadline = 10 * time.Minute, 30 * time.Minute
	cases := []struct {
		name        string
		namespace   string // the group's namespace: team-a has the deadline, team-b none
		drainingFor time.Duration
		outcome     fakeeviction.Outcome
		pod         *corev1.Pod
		want        DrainResult
		wantMsg     string
		wantGrace   map[string]int64 // pods deleted past the deadline, with their grace period
		reason      string           // the metric's label counted
	}{
		{name: "a refusal within the deadline is waited for, not blocked past the drain timeout", namespace: "team-a", drainingFor: 20 * time.Minute,
			outcome: fakeeviction.Refuse, pod: appPod("web-1", 30), want: Draining,
			wantMsg: "apps/web-1: eviction refused: Cannot evict pod as it would violate the pod's disruption budget.; the drain deadline deletes what is left at 2026-11-29T09:10:00Z"},
		{name: "a refusal past the deadline is deleted", namespace: "team-a", drainingFor: 31 * time.Minute,
			outcome: fakeeviction.Refuse, pod: appPod("web-1", 30), want: Drained, wantGrace: map[string]int64{"web-1": 30}, reason: "eviction_refused"},
		{name: "a long grace period is capped", namespace: "team-a", drainingFor: 31 * time.Minute,
			outcome: fakeeviction.Refuse, pod: appPod("broker-0", 3600), want: Drained, wantGrace: map[string]int64{"broker-0": 60}, reason: "eviction_refused"},
		{name: "a failing eviction past the deadline is deleted", namespace: "team-a", drainingFor: 31 * time.Minute,
			outcome: fakeeviction.Fail, pod: appPod("web-1", 30), want: Drained, wantGrace: map[string]int64{"web-1": 30}, reason: "eviction_failed"},
		{name: "a pod terminating for an hour past the deadline is deleted again with the cap", namespace: "team-a", drainingFor: 31 * time.Minute,
			pod: terminating(appPod("broker-0", 3600), now, 10*time.Minute), want: Drained, wantGrace: map[string]int64{"broker-0": 60}, reason: "terminating"},
		{name: "without a deadline a refusal past the drain timeout is blocked", namespace: "team-b", drainingFor: 31 * time.Minute,
			outcome: fakeeviction.Refuse, pod: appPod("web-1", 30), want: Blocked, wantMsg: "node n1 could not be drained within 10m0s: apps/web-1: eviction refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeeviction.New(func() time.Time { return now }, func(*corev1.Pod) fakeeviction.Outcome { return tc.outcome }, tc.pod)
			b, _ := groupClient(t)
			rec := events.NewFakeRecorder(10)
			d := &Drainer{Kube: srv.Kube, Client: b.Build(), Recorder: rec, Timeout: timeout, Step: 100 * time.Millisecond,
				Now: func() time.Time { return now }, retry: 5 * time.Millisecond,
				Deadline: func(g types.NamespacedName) time.Duration {
					if g.Namespace == "team-a" {
						return deadline
					}
					return 0
				}}
			var before float64
			if tc.reason != "" {
				before = deletedCount(t, tc.reason)
			}
			got, msg, err := d.DrainFor(context.Background(), types.NamespacedName{Namespace: tc.namespace, Name: "web"}, drainNode(now, tc.drainingFor, true))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("result %v (%q), want %v saying %q", got, msg, tc.want, tc.wantMsg)
			}
			grace := deleteGrace(srv.Kube.Actions())
			if len(grace) != len(tc.wantGrace) {
				t.Errorf("pods deleted %v, want %v", grace, tc.wantGrace)
			}
			evs := drainEvents(rec)
			for pod, g := range tc.wantGrace {
				if grace[pod] != g {
					t.Errorf("pod %s deleted with grace period %d, want %d", pod, grace[pod], g)
				}
				n := 0
				for _, e := range evs {
					if strings.HasPrefix(e, "Warning "+ReasonDrainDeadline) && strings.Contains(e, "apps/"+pod) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%d Warning Event(s) naming apps/%s, want 2 (node and group): %q", n, pod, evs)
				}
			}
			if tc.reason != "" {
				if after := deletedCount(t, tc.reason); after != before+float64(len(tc.wantGrace)) {
					t.Errorf("metric %s went from %v to %v, want +%d", tc.reason, before, after, len(tc.wantGrace))
				}
			}
		})
	}
}

// A workload that tolerates every taint and comes back to the node after
// each eviction is evicted at most MaxArrivalEvictions times, then left
// on the node with a Warning naming its pod: a delete's drain (steps, then
// Remaining before the instance goes) ends instead of evicting it in a
// loop. A pod that does not tolerate the cordon is never left.
func TestArrivalsTolerantOfTheCordonAreBounded(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for _, tolerant := range []bool{true, false} {
		t.Run(map[bool]string{true: "tolerates every taint", false: "tolerates no taint"}[tolerant], func(t *testing.T) {
			srv := fakeeviction.New(func() time.Time { return now }, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }, appPod("web-1", 30))
			arrivals := 0
			srv.AfterEviction = func(p *corev1.Pod) {
				arrivals++
				again := appPod("web-1-"+string(rune('a'+arrivals)), 30)
				again.CreationTimestamp = metav1.NewTime(now)
				if tolerant {
					again.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				}
				if err := srv.Add(again); err != nil {
					t.Error(err)
				}
			}
			b, group := groupClient(t)
			rec := events.NewFakeRecorder(20)
			d := &Drainer{Kube: srv.Kube, Client: b.Build(), Recorder: rec, Timeout: time.Hour, Step: 50 * time.Millisecond,
				Now: func() time.Time { return now }, retry: 5 * time.Millisecond}
			node := drainNode(now, time.Minute, true)
			const passes = 3 * MaxArrivalEvictions
			pass := 0
			for ; pass < passes; pass++ {
				if _, _, err := d.DrainFor(context.Background(), group, node); err != nil {
					t.Fatal(err)
				}
				left, err := d.RemainingFor(context.Background(), group, node)
				if err != nil {
					t.Fatal(err)
				}
				if len(left) == 0 {
					break
				}
			}
			if !tolerant {
				if pass < passes {
					t.Fatalf("the drain ended after %d passes with pods that do not tolerate the cordon still arriving", pass+1)
				}
				if evs := drainEvents(rec); len(evs) != 0 {
					t.Errorf("Events %q, want none", evs)
				}
				return
			}
			if pass == passes {
				t.Fatalf("the drain never ended: %d evictions after %d passes", arrivals, passes)
			}
			if arrivals != 1+MaxArrivalEvictions {
				t.Errorf("%d evictions, want the first and %d of its returns", arrivals, MaxArrivalEvictions)
			}
			evs := drainEvents(rec)
			last := "apps/web-1-" + string(rune('a'+arrivals))
			if len(evs) != 2 || !strings.Contains(evs[0], ReasonDrainPodsLeft) || !strings.Contains(evs[0], last) || !strings.Contains(evs[0], "apps/ReplicaSet/web") {
				t.Errorf("Events %q, want a %s on the node and on the group naming %s and its workload", evs, ReasonDrainPodsLeft, last)
			}
		})
	}
}
