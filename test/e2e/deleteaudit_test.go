package e2e

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podAudit samples an app's pods and the cluster's Nodes every 100 ms
// until stopped: the fewest Ready pods seen (Ready, not terminating, on a
// Node that exists) and every pod seen bound to a Node that no longer
// exists (it died with its instance, undrained).
type podAudit struct {
	stop, done chan struct{}
	mu         sync.Mutex
	minReady   int
	samples    int
	orphans    map[string]string // pod -> the node that was gone
}

func auditPods(namespace string, labels map[string]string) *podAudit {
	a := &podAudit{stop: make(chan struct{}), done: make(chan struct{}), minReady: 1 << 30, orphans: map[string]string{}}
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			a.sample(namespace, labels)
		}
	}()
	return a
}

func (a *podAudit) sample(namespace string, labels map[string]string) {
	ctx := context.Background()
	// Nodes are listed after pods: a pod bound to a Node registered
	// between the two reads is not taken for an orphan.
	pods, nodes := &corev1.PodList{}, &corev1.NodeList{}
	if admin.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)) != nil || admin.List(ctx, nodes) != nil {
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
		case p.DeletionTimestamp == nil && podReady(&p):
			ready++
		}
	}
	a.minReady, a.samples = min(a.minReady, ready), a.samples+1
}

// end stops the sampling and returns the fewest Ready pods, the number of
// samples and the orphans seen ("<pod> on <node>", sorted).
func (a *podAudit) end() (int, int, []string) {
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

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tolerateEverything gives a pod the toleration of every taint
// (operator Exists), which many charts ship: the cordon's
// node.kubernetes.io/unschedulable taint included.
func tolerateEverything(s *corev1.PodSpec) {
	s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

// The user report of issue 24: an app of 4 replicas under a
// PodDisruptionBudget of minAvailable 3 on a 2-node group, a second group
// Ready beside it; deleting the first group took the app to 2 ready pods,
// and two of its pods were still bound to a node that had already gone.
//
// Why TestDeleteDrainsWithinThePodDisruptionBudget passed: its app does
// not tolerate the cordon. This one tolerates every taint, so the
// scheduler puts replacements back on the group's cordoned nodes (the
// emptiest); each node's drain ended once the pods it had listed were
// gone, its Drained outcome was kept, and the Auto Scaling group was
// deleted with the pods that had landed since. The second group has 4
// nodes, so the app can spread off the first group at all (with 2, the
// scheduler's spreading puts one pod back on each emptied node forever).
//
// Sampled every 100 ms from the delete until the app runs in full on the
// second group: never fewer than 3 Ready pods, and no pod ever bound to a
// Node that no longer exists.
func TestDeleteKeepsTheBudgetAndLeavesNoPodOnAGoneNode(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-delete-tolerating"
	setBoundaries(t, cloud.boundaries(cloud.amis[0], 5))
	namespace(t, ns)
	old := shortGroup(ns, "old", 2, 2)
	create(t, old)
	oldReady := waitReady(t, old, 3*time.Minute)
	teamApp(t, ns, 4, intstr.FromInt32(3), tolerateEverything)
	next := shortGroup(ns, "next", 4, 4)
	create(t, next)
	waitReady(t, next, 3*time.Minute)
	var nextNodes []string
	for _, n := range groupNodes(t, next) {
		nextNodes = append(nextNodes, n.Name)
	}
	labels := map[string]string{"app": "team-app"}

	audit := auditPods(ns, labels)
	g.Expect(admin.Delete(ctx, old)).To(Succeed())
	waitGone(t, old, 5*time.Minute)
	g.Expect(scalingGroupExists(t, oldReady.Status.ActiveScalingGroupName)).To(BeFalse(), "the old group's Auto Scaling group is deleted")
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		var on []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				on = append(on, p.Spec.NodeName)
			}
		}
		g.Expect(on).To(HaveLen(4))
		g.Expect(on).To(HaveEach(BeElementOf(nextNodes)))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the app runs in full on the next group")
	minReady, samples, orphans := audit.end()
	t.Logf("audit: %d samples, at least %d Ready pods, orphans %v", samples, minReady, orphans)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node that no longer exists: they died with its instance, undrained")
	g.Expect(minReady).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
}
