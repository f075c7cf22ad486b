package instancegroup

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// fargateRepeatEvictions counts the pods evicted again during Fargate
// profile replacements (see ReasonFargateEvictionRepeated).
var fargateRepeatEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_fargate_repeat_evictions_total",
	Help: "Pods a Fargate profile replacement found on a retiring profile although they were created after the replacement evicted a pod of their workload (EKS placed them on the old profile; they are evicted again).",
}, []string{"namespace", "name"})

func init() { metrics.Registry.MustRegister(fargateRepeatEvictions) }

// fargateRepeats follows, per group under a Fargate replacement, when
// each workload first had a pod evicted from a retiring profile and which
// pods came back onto one: a pod of the workload created after that
// first eviction and found on a retiring profile is a repeat. The zero
// value is ready to use; safe for concurrent use. Kept in memory: after a
// restart the count starts again.
type fargateRepeats struct {
	mu     sync.Mutex
	groups map[types.NamespacedName]*replacementRepeats
}

type replacementRepeats struct {
	firstEviction map[string]time.Time // workload -> its first eviction
	seen          map[types.UID]bool   // repeats counted
	repeats       map[string]int       // workload -> repeats seen
}

// evicted records that pod (a retiring profile's, its drain started at
// now) was evicted.
func (f *fargateRepeats) evicted(key types.NamespacedName, pod *corev1.Pod, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.group(key)
	if w := workload(pod); g.firstEviction[w].IsZero() {
		g.firstEviction[w] = now
	}
}

// repeat reports, for pod found on a retiring profile, how many repeats
// its workload has had when pod is one seen for the first time (counted
// in the metric; the first is announced), else 0.
func (f *fargateRepeats) repeat(key types.NamespacedName, pod *corev1.Pod) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.group(key)
	w := workload(pod)
	first, ok := g.firstEviction[w]
	if !ok || g.seen[pod.UID] || !pod.CreationTimestamp.Time.After(first) {
		return 0
	}
	g.seen[pod.UID] = true
	g.repeats[w]++
	fargateRepeatEvictions.WithLabelValues(key.Namespace, key.Name).Inc()
	return g.repeats[w]
}

func (f *fargateRepeats) group(key types.NamespacedName) *replacementRepeats {
	if f.groups == nil {
		f.groups = map[types.NamespacedName]*replacementRepeats{}
	}
	g := f.groups[key]
	if g == nil {
		g = &replacementRepeats{firstEviction: map[string]time.Time{}, seen: map[types.UID]bool{}, repeats: map[string]int{}}
		f.groups[key] = g
	}
	return g
}

// forget drops key's record (its replacement ended, or the group is gone).
func (f *fargateRepeats) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.groups, key)
}

// workload names the controller of pod, "namespace/Kind/name": a
// ReplicaSet's pods by their Deployment (the ReplicaSet name without the
// pod-template-hash suffix), so a rollout's new ReplicaSet is the same
// workload; a pod without a controller by itself.
func workload(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return pod.Namespace + "/Pod/" + pod.Name
	}
	if h := pod.Labels["pod-template-hash"]; ref.Kind == "ReplicaSet" && h != "" {
		if name, ok := strings.CutSuffix(ref.Name, "-"+h); ok {
			return pod.Namespace + "/Deployment/" + name
		}
	}
	return pod.Namespace + "/" + ref.Kind + "/" + ref.Name
}

// podsOf lists the pods labelled key=value (a retiring Fargate
// profile's) from the API server, before their drains start.
func (d groupDisruptions) podsOf(ctx context.Context, key, value string) ([]corev1.Pod, error) {
	list, err := d.r.Rolling.Drainer.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{key: value}).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods labelled %s=%s to follow repeated evictions: %w", key, value, err)
	}
	return list.Items, nil
}

// followRepeats judges pods, those of retiring Fargate profile profile
// (podsOf, read before this pass's drains): one created after its
// workload's first eviction is a repeat (fargateRepeats.repeat),
// announced once per workload by a Warning Event
// ReasonFargateEvictionRepeated; those on started, the nodes whose drain
// this pass started, are recorded as evicted.
func (d groupDisruptions) followRepeats(profile string, pods []corev1.Pod, started []string) {
	group, now := client.ObjectKeyFromObject(d.ig), d.r.now()
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName == "" {
			continue
		}
		if n := d.r.repeats.repeat(group, pod); n == 1 {
			d.r.Recorder.Eventf(d.ig, nil, corev1.EventTypeWarning, ReasonFargateEvictionRepeated, "Replace",
				"Pod %s/%s of %s was created after the replacement evicted a pod of that workload, and EKS placed it on retiring Fargate profile %s (both profiles match it; EKS picks one): it is evicted again; see instance_manager_fargate_repeat_evictions_total",
				pod.Namespace, pod.Name, workload(pod), profile)
		}
		if slices.Contains(started, pod.Spec.NodeName) {
			d.r.repeats.evicted(group, pod, now)
		}
	}
}
