package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxArrivalEvictions bounds how many pods of one workload (namespace and
// controller, e.g. a ReplicaSet) a drain evicts from a node after they
// arrived there while it drained, when they tolerate the cordon
// (node.kubernetes.io/unschedulable:NoSchedule, as a toleration of every
// taint, {operator: Exists}, does): no taint keeps such pods off the node,
// and the scheduler may put each replacement back on it (the emptiest
// node), so evicting them again would never end the drain. Past the bound
// their pods are left on the node, go with its instance, and a Warning
// (ReasonDrainPodsLeft) names them. Karpenter leaves pods that tolerate
// its disruption taint in place from the start; this evicts them a few
// times first, so that a replacement the scheduler puts elsewhere is not
// lost.
const MaxArrivalEvictions = 5

var podsLeft = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "instance_manager_drain_pods_left_total",
	Help: "Pods a drain left on its node because they tolerate the cordon and kept coming back (after " +
		"MaxArrivalEvictions evictions of their workload, or past the drain deadline); they go with the node.",
})

// arrivals counts, per node drain (a node and its drain start), the
// evictions of pods that arrived after the drain started and tolerate
// the cordon, by workload. Kept in memory: a restarted controller counts
// again from zero, which bounds the evictions all the same.
type arrivals struct {
	mu     sync.Mutex
	drains map[string]*drainArrivals // by node name
}

type drainArrivals struct {
	started string         // the node's AnnotationDrainStarted
	evicted map[string]int // workload -> evictions of its arrivals
	left    map[types.UID]bool
}

// of returns node's record (a.mu held), started again for a new drain.
func (a *arrivals) of(node *corev1.Node) *drainArrivals {
	if a.drains == nil {
		a.drains = map[string]*drainArrivals{}
	}
	started := node.Annotations[AnnotationDrainStarted]
	r := a.drains[node.Name]
	if r == nil || r.started != started {
		a.prune()
		r = &drainArrivals{started: started, evicted: map[string]int{}, left: map[types.UID]bool{}}
		a.drains[node.Name] = r
	}
	return r
}

// forgetAfter is how long a node drain's record is kept: past it the node
// is long gone or drained again (a new record).
const forgetAfter = 7 * 24 * time.Hour

// prune forgets the records of drains that started more than forgetAfter
// ago, so nodes that are gone do not accumulate (a.mu held).
func (a *arrivals) prune() {
	for name, r := range a.drains {
		if started, err := time.Parse(time.RFC3339, r.started); err != nil || time.Since(started) > forgetAfter {
			delete(a.drains, name)
		}
	}
}

// evicted counts an accepted eviction of pod from node when pod arrived
// after the drain started and tolerates the cordon.
func (a *arrivals) evicted(node *corev1.Node, pod *corev1.Pod) {
	if !arrived(node, pod) || !toleratesCordon(pod) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.of(node).evicted[workload(pod)]++
}

// split separates from pods those the drain leaves on node: pods that
// tolerate the cordon and arrived after the drain started whose workload
// had MaxArrivalEvictions such pods evicted, or any of them once past is
// true (the drain's deadline passed). fresh names the pods left for the
// first time ("namespace/pod (workload, evictions)"), to warn about once.
func (a *arrivals) split(node *corev1.Node, pods []corev1.Pod, past bool) (keep []corev1.Pod, fresh []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.of(node)
	for _, p := range pods {
		w := workload(&p)
		if !arrived(node, &p) || !toleratesCordon(&p) || (!past && r.evicted[w] < MaxArrivalEvictions) {
			keep = append(keep, p)
			continue
		}
		if !r.left[p.UID] {
			r.left[p.UID] = true
			fresh = append(fresh, fmt.Sprintf("%s/%s (%s, %d of its pods evicted after they came back)", p.Namespace, p.Name, w, r.evicted[w]))
		}
	}
	return keep, fresh
}

// leave returns the pods of node the drain evicts: pods without those it
// leaves (see arrivals.split), warning on node and group about the pods
// left for the first time.
func (d *Drainer) leave(ctx context.Context, group types.NamespacedName, node *corev1.Node, pods []corev1.Pod, past bool) []corev1.Pod {
	keep, fresh := d.arrivals.split(node, pods, past)
	if len(fresh) > 0 {
		podsLeft.Add(float64(len(fresh)))
		slices.Sort(fresh)
		d.warn(ctx, group, node, ReasonDrainPodsLeft, "Leaving pods on node %s to go with it: they tolerate its cordon and came back after their evictions "+
			"(at most %d per workload, or past the drain deadline), so no eviction can move them: %s", node.Name, MaxArrivalEvictions, strings.Join(fresh, "; "))
	}
	return keep
}

// arrived reports whether pod was created after node's drain started.
func arrived(node *corev1.Node, pod *corev1.Pod) bool {
	started, err := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainStarted])
	return err == nil && !pod.CreationTimestamp.Time.Before(started)
}

// workload names pod's controller ("namespace/Kind/name"), or the pod
// itself when it has none.
func workload(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return pod.Namespace + "/" + ref.Kind + "/" + ref.Name
	}
	return pod.Namespace + "/Pod/" + pod.Name
}
