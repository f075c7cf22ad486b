package upgrade

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// With a drain runner a Step never waits for a drain: while the drain is
// held (its one pod's eviction refused, as a PodDisruptionBudget would),
// Steps report it and terminate nothing; once the eviction goes through,
// the rotation goes on and finishes.
func TestRollingUpdateDrainsInTheBackground(t *testing.T) {
	g := &fakeGroup{min: 2, max: 3, desired: 2}
	g.add("i-a", 1, false)
	g.add("i-b", 1, false)
	r := newRollout(t, nil, g)
	var held atomic.Bool
	held.Store(true)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0", UID: "uid-web-0"},
		Spec:   corev1.PodSpec{NodeName: "i-a", TerminationGracePeriodSeconds: ptr.To(int64(30))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	srv := fakeeviction.New(time.Now, func(*corev1.Pod) fakeeviction.Outcome {
		if held.Load() {
			return fakeeviction.Refuse
		}
		return fakeeviction.Delete
	}, pod)
	r.strat.Drainer.Kube = srv.Kube
	r.strat.Drainer.Step = 20 * time.Millisecond
	d := &drain.Drains{Drainer: r.strat.Drainer, Max: 1, Interval: time.Millisecond}
	r.strat.Drains = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 3 {
		p := r.step()
		if len(g.terminated) != 0 || !strings.HasPrefix(p.Message, "draining i-a") {
			t.Fatalf("step %d while the drain is held: %q, terminated %v", i, p.Message, g.terminated)
		}
		time.Sleep(10 * time.Millisecond)
	}
	held.Store(false)
	var p Progress
	for i := 0; i < 500 && !p.Done; i++ {
		time.Sleep(5 * time.Millisecond)
		p = r.step()
	}
	if !p.Done || strings.Join(g.terminated, ",") != "i-a,i-b" {
		t.Fatalf("done=%v terminated %v, want i-a then i-b", p.Done, g.terminated)
	}
	if got := d.Draining(types.NamespacedName{Namespace: "team-a", Name: "web"}); len(got) != 0 {
		t.Errorf("drains left: %v", got)
	}
}
