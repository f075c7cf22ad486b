package harness

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodAudit (Suite.AuditPods) samples an app's pods and the cluster's Nodes every 100 ms
// until stopped: the fewest Ready pods seen (Ready, not terminating, on a
// Node that exists) and every pod seen bound to a Node that no longer
// exists (it died with its instance, undrained).
type PodAudit struct {
	stop, done chan struct{}
	mu         sync.Mutex
	minReady   int
	samples    int
	orphans    map[string]string // pod -> the node that was gone
}

// AuditPods samples the pods of namespace with labels every 100 ms until
// End: the fewest Ready pods seen, and pods bound to a Node that no longer
// exists (orphans, which the pod garbage collector then removes).
func (s *Suite) AuditPods(namespace string, labels map[string]string) *PodAudit {
	a := &PodAudit{stop: make(chan struct{}), done: make(chan struct{}), minReady: 1 << 30, orphans: map[string]string{}}
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			a.sample(s, namespace, labels)
		}
	}()
	return a
}

func (a *PodAudit) sample(s *Suite, namespace string, labels map[string]string) {
	ctx := context.Background()
	// Nodes are listed after pods: a pod bound to a Node registered
	// between the two reads is not taken for an orphan.
	pods, nodes := &corev1.PodList{}, &corev1.NodeList{}
	if s.Admin.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)) != nil || s.Admin.List(ctx, nodes) != nil {
		return
	}
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	ready := 0
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pods.Items {
		switch {
		case p.Spec.NodeName == "":
		case !exists[p.Spec.NodeName]:
			a.orphans[p.Name] = p.Spec.NodeName
		case p.DeletionTimestamp == nil && PodReady(&p):
			ready++
		}
	}
	a.minReady, a.samples = min(a.minReady, ready), a.samples+1
}

// End stops the sampling and returns the fewest Ready pods, the number of
// samples and the orphans seen ("<pod> on <node>", sorted).
func (a *PodAudit) End() (int, int, []string) {
	close(a.stop)
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	var orphans []string
	for p, n := range a.orphans {
		orphans = append(orphans, p+" on "+n)
	}
	sort.Strings(orphans)
	return a.minReady, a.samples, orphans
}

// PodReady tells whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodUIDs (Suite.WatchPodUIDs) records the UID of every pod of an app
// seen, sampled every 100 ms until End: the replicas plus one for each
// pod evicted or deleted (its replacement), which bounds how often a
// drain moved the app.
type PodUIDs struct {
	stop, done chan struct{}
	mu         sync.Mutex
	seen       map[types.UID]bool
}

// WatchPodUIDs samples the pods of namespace with labels every 100 ms
// until End.
func (s *Suite) WatchPodUIDs(namespace string, labels map[string]string) *PodUIDs {
	w := &PodUIDs{stop: make(chan struct{}), done: make(chan struct{}), seen: map[types.UID]bool{}}
	go func() {
		defer close(w.done)
		for {
			pods := &corev1.PodList{}
			if s.Admin.List(context.Background(), pods, client.InNamespace(namespace), client.MatchingLabels(labels)) == nil {
				w.mu.Lock()
				for _, p := range pods.Items {
					w.seen[p.UID] = true
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// End stops the sampling and returns how many distinct pods were seen.
func (w *PodUIDs) End() int {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}
