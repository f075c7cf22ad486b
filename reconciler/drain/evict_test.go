package drain

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// drainNode is node n1, cordoned for a drain that started drainingFor
// ago, Ready or not.
func drainNode(now time.Time, drainingFor time.Duration, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
			AnnotationDrainStarted: now.Add(-drainingFor).UTC().Format(time.RFC3339)}},
		Spec:   corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
}

// appPod is a running pod of a ReplicaSet on n1, with a grace period of
// grace seconds.
func appPod(name string, grace int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: ptr.To(grace)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// terminating marks pod as deleted requestedAgo, with its grace period.
func terminating(pod *corev1.Pod, now time.Time, requestedAgo time.Duration) *corev1.Pod {
	grace := *pod.Spec.TerminationGracePeriodSeconds
	at := metav1.NewTime(now.Add(-requestedAgo).Add(time.Duration(grace) * time.Second))
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &at, &grace
	return pod
}

// One drain step judges each pod: only refused evictions (429) make a
// node Blocked (past the drain timeout); a graceful termination longer
// than the drain timeout, even one past its grace period, is
// "terminating"; another Eviction API error is retried and reported; pods already terminating on a node that is not
// Ready are not waited for past UnreachablePodWait; pods that arrive
// during the step are evicted by the next one.
func TestDrainJudgesEachPod(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	const timeout = 10 * time.Minute
	daemon := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"}}
	daemonPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent-n1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	finished := appPod("job-done", 30)
	finished.Status.Phase = corev1.PodSucceeded

	cases := []struct {
		name        string
		drainingFor time.Duration
		notReady    bool
		outcome     fakeeviction.Outcome
		objects     []runtime.Object
		arrives     bool // an evicted pod's replacement lands on the node again
		tolerant    bool // ... and tolerates every taint, the cordon's included
		want        DrainResult
		wantMsg     []string
		wantEvicted map[string]int // eviction requests by pod
	}{
		{name: "evicted pods that go leave the node drained", drainingFor: time.Minute, outcome: fakeeviction.Delete,
			objects: []runtime.Object{appPod("web-1", 30), appPod("web-2", 30)}, want: Drained,
			wantEvicted: map[string]int{"apps/web-1": 1, "apps/web-2": 1}},
		{name: "an eviction refused within the drain timeout drains on", drainingFor: time.Minute, outcome: fakeeviction.Refuse,
			objects: []runtime.Object{appPod("web-1", 30)}, want: Draining, wantMsg: []string{"apps/web-1: eviction refused", "disruption budget"}},
		{name: "an eviction refused past the drain timeout is blocked", drainingFor: 20 * time.Minute, outcome: fakeeviction.Refuse,
			objects: []runtime.Object{appPod("web-1", 30)}, want: Blocked,
			wantMsg: []string{"node n1 could not be drained within 10m0s", "apps/web-1: eviction refused", "disruption budget"}},
		{name: "a graceful termination longer than the drain timeout is waited for, not blocked", drainingFor: 20 * time.Minute,
			outcome: fakeeviction.Terminate, objects: []runtime.Object{appPod("broker-0", 3600)}, want: Draining,
			wantMsg: []string{"apps/broker-0: terminating, its grace period ends 2026-11-26T10:00:00Z"}, wantEvicted: map[string]int{"apps/broker-0": 1}},
		{name: "a pod evicted earlier and within its grace period is waited for, not evicted again", drainingFor: 20 * time.Minute,
			objects: []runtime.Object{terminating(appPod("broker-0", 3600), now, 15*time.Minute)}, want: Draining,
			wantMsg: []string{"apps/broker-0: terminating"}, wantEvicted: map[string]int{"apps/broker-0": 0}},
		{name: "a pod still there long past its grace period is terminating, not blocked", drainingFor: 20 * time.Minute,
			objects: []runtime.Object{terminating(appPod("stuck-0", 30), now, 30*time.Second+10*time.Minute)}, want: Draining,
			wantMsg: []string{"apps/stuck-0: terminating, still there 10m0s after its grace period ended"}},
		{name: "an eviction failing past the drain timeout for another reason than a budget is retried, not blocked", drainingFor: 20 * time.Minute,
			outcome: fakeeviction.Fail, objects: []runtime.Object{appPod("web-1", 30)}, want: Draining,
			wantMsg: []string{"apps/web-1: eviction failed (retried; not a budget refusal)", "more than one PodDisruptionBudget"}},
		{name: "a pod terminating on a NotReady node past the bound is not waited for", drainingFor: time.Minute, notReady: true,
			objects: []runtime.Object{terminating(appPod("web-1", 600), now, UnreachablePodWait+time.Second)}, want: Drained,
			wantEvicted: map[string]int{"apps/web-1": 0}},
		{name: "a pod terminating on a NotReady node within the bound is waited for", drainingFor: time.Minute, notReady: true,
			objects: []runtime.Object{terminating(appPod("web-1", 600), now, UnreachablePodWait/2)}, want: Draining,
			wantMsg: []string{"apps/web-1: terminating"}},
		{name: "DaemonSet and finished pods are left alone", drainingFor: time.Minute, outcome: fakeeviction.Refuse,
			objects: []runtime.Object{daemon, daemonPod, finished}, want: Drained,
			wantEvicted: map[string]int{"kube-system/agent-n1": 0, "apps/job-done": 0}},
		{name: "a pod that lands on the node during the step keeps it draining", drainingFor: time.Minute, outcome: fakeeviction.Delete,
			objects: []runtime.Object{appPod("web-1", 30)}, arrives: true, want: Draining,
			wantMsg: []string{"pods arrived on cordoned node n1 while it drained: apps/web-1-again"}},
		{name: "a pod tolerating the cordon that lands again does not hold the drain", drainingFor: time.Minute, outcome: fakeeviction.Delete,
			objects: []runtime.Object{appPod("web-1", 30)}, arrives: true, tolerant: true, want: Drained,
			wantEvicted: map[string]int{"apps/web-1": 1, "apps/web-1-again": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outcome := tc.outcome
			srv := fakeeviction.New(func() time.Time { return now }, func(*corev1.Pod) fakeeviction.Outcome { return outcome }, tc.objects...)
			if tc.arrives {
				srv.AfterEviction = func(p *corev1.Pod) {
					if !strings.HasSuffix(p.Name, "-again") {
						again := appPod(p.Name+"-again", 30)
						if tc.tolerant {
							again.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
						}
						if err := srv.Add(again); err != nil {
							t.Error(err)
						}
					}
				}
			}
			d := &Drainer{Kube: srv.Kube, Timeout: timeout, Step: 100 * time.Millisecond, Now: func() time.Time { return now }, retry: 5 * time.Millisecond}
			got, msg, err := d.Drain(context.Background(), drainNode(now, tc.drainingFor, !tc.notReady))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("result %v (%q), want %v", got, msg, tc.want)
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			for pod, n := range tc.wantEvicted {
				if got := srv.Evictions(pod); got != n {
					t.Errorf("%d eviction(s) of %s, want %d", got, pod, n)
				}
			}
		})
	}
}

// Remaining lists what a drain would still evict: nothing once the pods
// are gone or finished, the pods otherwise.
func TestRemaining(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	finished := appPod("job-done", 30)
	finished.Status.Phase = corev1.PodFailed
	cases := []struct {
		name    string
		objects []runtime.Object
		want    string
	}{
		{"empty node", nil, ""},
		{"finished pods only", []runtime.Object{finished}, ""},
		{"a running pod", []runtime.Object{finished, appPod("web-1", 30)}, "apps/web-1"},
		{"a terminating pod", []runtime.Object{terminating(appPod("web-1", 30), now, time.Second)}, "apps/web-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeeviction.New(func() time.Time { return now }, nil, tc.objects...)
			d := &Drainer{Kube: srv.Kube, Timeout: time.Minute, Step: time.Second, Now: func() time.Time { return now }}
			pods, err := d.Remaining(context.Background(), drainNode(now, time.Minute, true))
			if err != nil {
				t.Fatal(err)
			}
			if got := podNames(pods); got != tc.want {
				t.Errorf("remaining %q, want %q", got, tc.want)
			}
		})
	}
}
