package termination

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

func TestFirst(t *testing.T) {
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{drain.AnnotationDrainStarted: "2026-11-26T12:00:00Z"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	byHand := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	owned := func(o drain.Owner) *corev1.Node {
		n := cordoned.DeepCopy()
		n.Annotations[drain.AnnotationDrainOwner] = string(o)
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want step
	}{
		{"no node (never joined, or gone): complete at once", nil, stepComplete},
		{"a node in service: cordon and drain", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, stepCordon},
		{"cordoned by hand only: still cordoned and drained by us", byHand, stepCordon},
		{"a rotation's drain (recorded before owners were): taken over", cordoned, stepCordon},
		{"a rotation's drain: taken over, so no rotation gives it back", owned(drain.OwnerRotation), stepCordon},
		{"a surge give-back's drain: taken over", owned(drain.OwnerSurge), stepCordon},
		{"a replacement's drain: taken over", owned(drain.OwnerRetire), stepCordon},
		{"already ours: poll", owned(drain.OwnerTermination), stepPoll},
		{"an interruption's drain: poll, it stays the interruption's", owned(drain.OwnerInterruption), stepPoll},
		{"the group's deletion drains it: poll", owned(drain.OwnerDelete), stepPoll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := first(tc.node); got != tc.want {
				t.Errorf("first = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  drain.DrainResult
		err  error
		want outcome
	}{
		{"drained: complete", drain.Drained, nil, complete},
		{"draining: wait", drain.Draining, nil, keepWaiting},
		{"blocked by a PodDisruptionBudget past the drain timeout: say so, keep it waiting", drain.Blocked, nil, blocked},
		{"an error listing or evicting: retry, never complete", drain.Drained, errors.New("apiserver down"), keepWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := after(tc.res, tc.err); got != tc.want {
				t.Errorf("after = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHeartbeatDue(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		since   time.Duration
		timeout time.Duration
		want    bool
	}{
		{"just seen", 0, 10 * time.Minute, false},
		{"before a third of the timeout", 199 * time.Second, 10 * time.Minute, false},
		{"at a third of the timeout", 200 * time.Second, 10 * time.Minute, true},
		{"the 30 s minimum hook", 10 * time.Second, 30 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heartbeatDue(t0.Add(tc.since), t0, tc.timeout); got != tc.want {
				t.Errorf("heartbeatDue after %v of %v = %v, want %v", tc.since, tc.timeout, got, tc.want)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		st    wait
		since time.Duration
		want  bool
	}{
		{"draining, heartbeated within the timeout: kept", wait{beat: t0}, 5 * time.Minute, false},
		{"no heartbeat for a whole timeout: Auto Scaling ended the wait", wait{beat: t0}, 11 * time.Minute, true},
		{"completed just now: kept (a stale listing may still show it)", wait{beat: t0.Add(-time.Hour), done: true, doneAt: t0}, time.Minute, false},
		{"completed a timeout ago: forgotten", wait{done: true, doneAt: t0}, 11 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := expired(t0.Add(tc.since), &tc.st, 10*time.Minute); got != tc.want {
				t.Errorf("expired = %v, want %v", got, tc.want)
			}
		})
	}
}
