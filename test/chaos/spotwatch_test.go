package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/test/harness"
)

// spotWatch samples, every 250ms, the Nodes of the waiting groups'
// namespaces and the pods of their apps (label app=team-app), in one
// listing of each (a harness.PodAudit per app would list four times as
// often), and records:
//   - a node of a waiting group cordoned or marked for drain by anyone but
//     the interruption (a rotation's drain left in place: a violation);
//   - an interrupted node, once cordoned by the interruption, given back or
//     taken over (a violation), and when it was first seen cordoned and
//     then empty of app pods (drained);
//   - the fewest Ready app pods of each namespace (Ready, not terminating,
//     on a Node that exists) and pods bound to a Node that is gone.
type spotWatch struct {
	namespaces map[string]bool

	mu         sync.Mutex
	warned     map[string]time.Time // node -> when its warning was sent
	cordoned   map[string]time.Time // node -> first seen cordoned by the interruption
	drained    map[string]time.Time // node -> first seen cordoned and empty
	violations map[string]string    // node/kind -> first description
	minReady   map[string]int       // namespace -> fewest Ready pods
	orphans    map[string]string    // pod -> gone node
	samples    int

	stop, done chan struct{}
}

func startSpotWatch(namespaces []string) *spotWatch {
	w := &spotWatch{namespaces: map[string]bool{}, warned: map[string]time.Time{}, cordoned: map[string]time.Time{},
		drained: map[string]time.Time{}, violations: map[string]string{}, minReady: map[string]int{}, orphans: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, ns := range namespaces {
		w.namespaces[ns] = true
		w.minReady[ns] = 1 << 30
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			w.sample(context.Background())
		}
	}()
	return w
}

// warn records that node's instance got a spot interruption warning at.
func (w *spotWatch) warn(node string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warned[node] = at
}

func (w *spotWatch) sample(ctx context.Context) {
	// Nodes are listed after pods: a pod bound to a Node registered
	// between the two reads is not taken for an orphan.
	pods, nodes := &corev1.PodList{}, &corev1.NodeList{}
	if admin.List(ctx, pods, client.MatchingLabels{"app": "team-app"}) != nil || admin.List(ctx, nodes) != nil {
		return
	}
	now := time.Now()
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	podsOn := map[string]int{}
	ready := map[string]int{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range pods.Items {
		if !w.namespaces[p.Namespace] || p.Spec.NodeName == "" {
			continue
		}
		podsOn[p.Spec.NodeName]++
		switch {
		case !exists[p.Spec.NodeName]:
			w.orphans[p.Namespace+"/"+p.Name] = p.Spec.NodeName
		case p.DeletionTimestamp == nil && harness.PodReady(&p):
			ready[p.Namespace]++
		}
	}
	for ns := range w.namespaces {
		w.minReady[ns] = min(w.minReady[ns], ready[ns])
	}
	w.samples++
	for i := range nodes.Items {
		w.judge(&nodes.Items[i], podsOn[nodes.Items[i].Name], now)
	}
}

// judge checks one Node of the cluster (w.mu held).
func (w *spotWatch) judge(n *corev1.Node, pods int, now time.Time) {
	if !w.namespaces[n.Labels[v1alpha1.LabelInstanceGroupNamespace]] {
		return
	}
	owner := drain.OwnerOf(n)
	byInterruption := n.Spec.Unschedulable && owner == drain.OwnerInterruption
	if (n.Spec.Unschedulable || owner != "") && !byInterruption {
		w.violate(n.Name, "held", fmt.Sprintf("node %s of waiting group %s/%s: unschedulable %t, drain owner %q at %s",
			n.Name, n.Labels[v1alpha1.LabelInstanceGroupNamespace], n.Labels[v1alpha1.LabelInstanceGroup], n.Spec.Unschedulable, owner, now.Format("15:04:05.000")))
	}
	if _, warned := w.warned[n.Name]; !warned {
		if owner == drain.OwnerInterruption {
			w.violate(n.Name, "unwarned", fmt.Sprintf("node %s drained for an interruption no warning was sent for", n.Name))
		}
		return
	}
	switch first := w.cordoned[n.Name]; {
	case byInterruption && first.IsZero():
		w.cordoned[n.Name] = now
	case !byInterruption && !first.IsZero():
		w.violate(n.Name, "released", fmt.Sprintf("interrupted node %s (cordoned by the interruption since %s) given back at %s: unschedulable %t, drain owner %q",
			n.Name, first.Format("15:04:05.000"), now.Format("15:04:05.000"), n.Spec.Unschedulable, owner))
	}
	if byInterruption && pods == 0 && w.drained[n.Name].IsZero() {
		w.drained[n.Name] = now
	}
}

func (w *spotWatch) violate(node, kind, what string) {
	if _, seen := w.violations[node+"/"+kind]; !seen {
		w.violations[node+"/"+kind] = what
	}
}

// undrained returns the warned nodes not seen drained yet.
func (w *spotWatch) undrained() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n := range w.warned {
		if w.drained[n].IsZero() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// spotResult is what a spotWatch saw, once stopped.
type spotResult struct {
	// drainTimes are the times from warning to drained node, by node.
	drainTimes map[string]time.Duration
	violations []string
	minReady   map[string]int
	orphans    []string
	samples    int
}

func (w *spotWatch) finish() spotResult {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	r := spotResult{drainTimes: map[string]time.Duration{}, minReady: w.minReady, samples: w.samples}
	for n, at := range w.warned {
		if d := w.drained[n]; !d.IsZero() {
			r.drainTimes[n] = d.Sub(at)
		}
	}
	for _, v := range w.violations {
		r.violations = append(r.violations, v)
	}
	for p, n := range w.orphans {
		r.orphans = append(r.orphans, p+" on "+n)
	}
	sort.Strings(r.violations)
	sort.Strings(r.orphans)
	return r
}
