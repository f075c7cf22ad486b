package nodehealth

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/providers"
)

const drain = "instancemgr.keikoproj.io/drain-started"

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// world is a group's instances and nodes for Judge: each instance is
// i-<n>, launched at launch, with a Node in the given state.
type world struct {
	instances []providers.Instance
	nodes     map[string]*corev1.Node
}

type nodeState int

const (
	noNode nodeState = iota
	ready
	notReady // NotReady since the given time
	draining
)

func (w *world) add(state string, launched time.Time, node nodeState, since time.Time) {
	n := len(w.instances)
	in := providers.Instance{ID: fmt.Sprintf("i-%02d", n), ProviderID: fmt.Sprintf("aws:///us-west-2a/i-%02d", n), LifecycleState: state, LaunchTime: launched}
	w.instances = append(w.instances, in)
	if w.nodes == nil {
		w.nodes = map[string]*corev1.Node{}
	}
	if node == noNode {
		return
	}
	status := corev1.ConditionTrue
	if node == notReady {
		status = corev1.ConditionFalse
	}
	nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%02d", n), CreationTimestamp: metav1.NewTime(launched)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since)}}}}
	if node == draining {
		nd.Annotations = map[string]string{drain: "2026-11-23T12:00:00Z"}
		nd.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	w.nodes[in.ProviderID] = nd
}

func ids(us []Unhealthy) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Instance.ID+":"+u.Reason)
	}
	return out
}

func TestJudge(t *testing.T) {
	s := Settings{StartupTimeout: 15 * time.Minute, UnhealthyTimeout: 5 * time.Minute, MaxReplacing: intstr.FromString("10%")}
	now := t0.Add(time.Hour)
	old := t0
	cases := []struct {
		name      string
		build     func(w *world)
		settings  func(*Settings)
		unhealthy []string
		replace   []string
		halted    bool
		next      time.Duration
		judged    int
	}{
		{"healthy group", func(w *world) {
			for range 5 {
				w.add("InService", old, ready, old)
			}
		}, nil, nil, nil, false, 0, 5},
		{"no node after the startup timeout", func(w *world) {
			for range 9 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", now.Add(-16*time.Minute), noNode, time.Time{})
		}, nil, []string{"i-09:StartupTimeout"}, []string{"i-09:StartupTimeout"}, false, 0, 10},
		{"still starting: judged later", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", now.Add(-10*time.Minute), noNode, time.Time{})
		}, nil, nil, nil, false, 5 * time.Minute, 2},
		{"NotReady past the unhealthy timeout", func(w *world) {
			for range 4 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", old, notReady, now.Add(-6*time.Minute))
		}, nil, []string{"i-04:NotReady"}, []string{"i-04:NotReady"}, false, 0, 5},
		{"NotReady briefly", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", old, notReady, now.Add(-time.Minute))
		}, nil, nil, nil, false, 4 * time.Minute, 2},
		{"a young node NotReady waits for the startup timeout", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", now.Add(-8*time.Minute), notReady, now.Add(-7*time.Minute))
		}, nil, nil, nil, false, 7 * time.Minute, 2},
		{"more than 20% unhealthy halts", func(w *world) {
			for range 3 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", old, notReady, old)
			w.add("InService", old, noNode, time.Time{})
		}, nil, []string{"i-03:NotReady", "i-04:StartupTimeout"}, nil, true, 0, 5},
		{"two of five just turned NotReady halts at once", func(w *world) {
			for range 3 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", old, notReady, now.Add(-time.Second))
			w.add("InService", old, notReady, now.Add(-time.Second))
		}, nil, nil, nil, true, 4*time.Minute + 59*time.Second, 5},
		{"one of three is within 20% rounded up", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", old, ready, old)
			w.add("InService", old, noNode, time.Time{})
		}, nil, []string{"i-02:StartupTimeout"}, []string{"i-02:StartupTimeout"}, false, 0, 3},
		{"maxReplacing bounds how many at once", func(w *world) {
			for range 8 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", old, noNode, time.Time{})
			w.add("InService", old, noNode, time.Time{})
		}, func(s *Settings) { s.MaxReplacing = intstr.FromInt32(1) }, []string{"i-08:StartupTimeout", "i-09:StartupTimeout"}, []string{"i-08:StartupTimeout"}, false, 0, 10},
		{"replacements in flight use the budget", func(w *world) {
			for range 9 {
				w.add("InService", old, ready, old)
			}
			w.add("InService", old, noNode, time.Time{})
			w.add("Pending", now, noNode, time.Time{})
		}, nil, []string{"i-09:StartupTimeout"}, nil, false, 0, 10},
		{"maxReplacing 0 only reports", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", old, ready, old)
			w.add("InService", old, ready, old)
			w.add("InService", old, noNode, time.Time{})
		}, func(s *Settings) { s.MaxReplacing = intstr.FromInt32(0) }, []string{"i-03:StartupTimeout"}, nil, false, 0, 4},
		{"rotating, standby and unknown launch times are left alone", func(w *world) {
			w.add("InService", old, ready, old)
			w.add("InService", old, draining, old)
			w.add("Standby", old, noNode, time.Time{})
			w.add("InService", time.Time{}, noNode, time.Time{})
			w.add("Terminating", old, noNode, time.Time{})
		}, nil, nil, nil, false, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &world{}
			c.build(w)
			st := s
			if c.settings != nil {
				c.settings(&st)
			}
			v := Judge(now, st, w.instances, w.nodes, drain)
			if got := ids(v.Unhealthy); fmt.Sprint(got) != fmt.Sprint(c.unhealthy) {
				t.Errorf("unhealthy = %v, want %v", got, c.unhealthy)
			}
			if got := ids(v.Replace); fmt.Sprint(got) != fmt.Sprint(c.replace) {
				t.Errorf("replace = %v, want %v", got, c.replace)
			}
			if v.Halted != c.halted || v.NextCheck != c.next || v.Judged != c.judged {
				t.Errorf("halted %v, next %s, judged %d; want %v, %s, %d", v.Halted, v.NextCheck, v.Judged, c.halted, c.next, c.judged)
			}
		})
	}
}
