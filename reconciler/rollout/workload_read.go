package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// Reading the pods the workload criteria judge, at a bounded cost.
//
// There is no Pod informer: over a 10,000-node cluster it would hold
// every pod in memory (hundreds of MB). Instead, only while a wave is
// judged and only when the policy has workload criteria
// (FailureCriteria.JudgesPods), the controller lists the pods of each of
// the wave's moved groups' new nodes (nodes created since the wave
// started) live from the API server, by the spec.nodeName field selector
// with resourceVersion 0 (served from the API server's watch cache, which
// indexes pods by node; at most 110 pods a node):
//   - each group at most once every podsEvery, and again as soon as a pod
//     it read not Ready would cross podNotReadyAfter (its verdict is due:
//     a fresh read confirms it or sees it recovered), and once the wave's
//     soak has ended (the wave completes on pods read after it);
//   - at most podListsPerSecond node Lists a second in all (burst
//     podListsBurst), the groups read longest ago first: a wave of 1,000
//     groups of 5 new nodes is re-read every ~4 minutes rather than
//     putting 5,000 Lists on the API server at once;
//   - of what it reads it keeps only the pods that may fail (not Ready,
//     or restarted more than maxContainerRestarts) of Deployments and
//     StatefulSets: a healthy fleet costs no memory; a broken one a few
//     hundred bytes per failing pod, forgotten when the wave ends;
//   - whether a ReplicaSet belongs to a Deployment is read once per
//     ReplicaSet (its metadata), only for pods that may fail.
const (
	podsEvery         = 30 * time.Second
	podListsPerSecond = 20
	podListsBurst     = 100
	// maxOwnersKept bounds the ReplicaSet-to-Deployment answers kept.
	maxOwnersKept = 10_000
)

// podReader keeps the last pods read per group of the judged wave. One
// worker reconciles (MaxConcurrentReconciles 1): no lock.
type podReader struct {
	api    client.Reader
	limit  *rate.Limiter
	groups map[string]*podsRead
	// deployed is whether a ReplicaSet (by UID) is controlled by a
	// Deployment.
	deployed map[types.UID]bool
}

// podsRead is one group's last read.
type podsRead struct {
	waveStart time.Time
	at        time.Time
	nodes     string // its new nodes, joined: a new one means a read is due
	pods      []Pod
}

func newPodReader(api client.Reader) *podReader {
	return &podReader{api: api, limit: rate.NewLimiter(podListsPerSecond, podListsBurst), groups: map[string]*podsRead{}, deployed: map[types.UID]bool{}}
}

// readPods fills Group.Pods for the moved groups of the wave prev judges
// (see the cost above), when the policy judges pods; it forgets every
// other group. A failed read is logged and the group keeps its last read
// (older pods can only delay a failure: Pod.ReadAt).
func (r *podReader) readPods(ctx context.Context, kube client.Reader, prev *record.Record, pol *boundaries.RolloutPolicy, revision string, groups []Group, now time.Time) {
	judged := judgedGroups(prev, pol, revision)
	for key := range r.groups {
		if _, ok := judged[key]; !ok {
			delete(r.groups, key)
		}
	}
	if len(judged) == 0 {
		return
	}
	w := prev.Waves[prev.Wave]
	waveStart := w.StartedAt.Time
	var soakEnd time.Time
	if w.HealthyAt != nil {
		soakEnd = w.HealthyAt.Add(w.Soak.Duration)
	}
	newNodes, err := r.newNodes(ctx, kube, judged, waveStart)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the judged groups' nodes; their pods are not read this time")
	}
	byKey := map[string]int{}
	for i, g := range groups {
		byKey[g.Key] = i
	}
	// Due groups, read longest ago first.
	var due []string
	for key := range judged {
		if i, ok := byKey[key]; !ok || !groups[i].AtTarget || err != nil {
			continue // on a failed Node List every group keeps its last read
		}
		switch {
		case len(newNodes[key]) == 0:
			// Nothing to list (no new node yet, or scaled in): read.
			r.groups[key] = &podsRead{waveStart: waveStart, at: now}
		case r.due(key, waveStart, newNodes[key], pol.Failure, soakEnd, now):
			due = append(due, key)
		}
	}
	slices.SortFunc(due, func(a, b string) int { return r.lastRead(a).Compare(r.lastRead(b)) })
	for _, key := range due {
		// One token a node List (a group of more nodes than the burst
		// takes the whole burst).
		if !r.limit.AllowN(now, min(max(1, len(newNodes[key])), podListsBurst)) {
			break // the rest keep their last read until tokens come back
		}
		pods, err := r.read(ctx, newNodes[key], pol.Failure, now)
		if err != nil {
			log.FromContext(ctx).Error(err, "reading the pods of a group's new nodes", "group", key)
			continue
		}
		r.groups[key] = &podsRead{waveStart: waveStart, at: now, nodes: joinNodes(newNodes[key]), pods: pods}
	}
	for key := range judged {
		if i, ok := byKey[key]; ok {
			if last := r.groups[key]; last != nil && last.waveStart.Equal(waveStart) {
				groups[i].Pods, groups[i].PodsReadAt = last.pods, last.at
			}
		}
	}
}

// judgedGroups are the groups of the wave prev is judging, by key, when
// the policy judges pods and the rollout of revision progresses.
func judgedGroups(prev *record.Record, pol *boundaries.RolloutPolicy, revision string) map[string]bool {
	if pol == nil || !pol.Failure.JudgesPods() || prev == nil || prev.Phase != record.PhaseProgressing || prev.Target != revision ||
		prev.Wave < 0 || prev.Wave >= len(prev.Waves) {
		return nil
	}
	w := prev.Waves[prev.Wave]
	if w.StartedAt == nil || w.CompletedAt != nil {
		return nil
	}
	out := map[string]bool{}
	for _, g := range w.Groups {
		if g.State != record.GroupUnjudged && g.State != record.GroupFailed {
			out[g.Group] = true
		}
	}
	return out
}

// newNodes lists, from the cache, the nodes of the judged groups created
// at or after waveStart, by group key.
func (r *podReader) newNodes(ctx context.Context, kube client.Reader, judged map[string]bool, waveStart time.Time) (map[string][]nodeJoined, error) {
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes, client.HasLabels{v1alpha1.LabelInstanceGroup}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	out := map[string][]nodeJoined{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		key := n.Labels[v1alpha1.LabelInstanceGroupNamespace] + "/" + n.Labels[v1alpha1.LabelInstanceGroup]
		if judged[key] && !n.CreationTimestamp.Time.Before(waveStart) {
			out[key] = append(out[key], nodeJoined{name: n.Name, created: n.CreationTimestamp.Time})
		}
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b nodeJoined) int { return strings.Compare(a.name, b.name) })
	}
	return out, nil
}

type nodeJoined struct {
	name    string
	created time.Time
}

func joinNodes(nodes []nodeJoined) string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	return strings.Join(names, ",")
}

func (r *podReader) lastRead(key string) time.Time {
	if last := r.groups[key]; last != nil {
		return last.at
	}
	return time.Time{}
}

// due reports whether the group's pods should be read now: never read for
// this wave, a new node joined, the last read is podsEvery old, the
// wave's soak ended (soakEnd, zero while not soaking) after it, or a pod
// read not Ready would cross podNotReadyAfter by now.
func (r *podReader) due(key string, waveStart time.Time, nodes []nodeJoined, f boundaries.FailureCriteria, soakEnd, now time.Time) bool {
	last := r.groups[key]
	if last == nil || !last.waveStart.Equal(waveStart) || last.nodes != joinNodes(nodes) || !now.Before(last.at.Add(podsEvery)) ||
		!soakEnd.IsZero() && last.at.Before(soakEnd) && !now.Before(soakEnd) {
		return true
	}
	for _, p := range last.pods {
		if !p.Ready && f.PodNotReadyAfter > 0 && !now.Before(p.NotReadySince.Add(f.PodNotReadyAfter)) && last.at.Before(p.NotReadySince.Add(f.PodNotReadyAfter)) {
			return true
		}
	}
	return false
}

// read lists the pods of nodes (live, by spec.nodeName, from the API
// server's watch cache) and keeps those that may fail f.
func (r *podReader) read(ctx context.Context, nodes []nodeJoined, f boundaries.FailureCriteria, now time.Time) ([]Pod, error) {
	var out []Pod
	for _, n := range nodes {
		pods := &corev1.PodList{}
		if err := r.api.List(ctx, pods, client.MatchingFields{"spec.nodeName": n.name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			return nil, fmt.Errorf("listing the pods of node %s: %w", n.name, err)
		}
		podLists.Inc()
		for i := range pods.Items {
			p, ok := podOf(&pods.Items[i], f)
			if !ok {
				continue
			}
			p.Node, p.NodeCreated, p.ReadAt = n.name, n.created, now
			owner, err := r.owner(ctx, &pods.Items[i])
			if err != nil {
				return nil, err
			}
			if p.Owner = owner; owner == OwnerDeployment || owner == OwnerStatefulSet {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// podOf is what the criteria need of pod, and whether it may fail them:
// running (not terminal, not being deleted) and not Ready, or restarted
// more than f allows.
func podOf(pod *corev1.Pod, f boundaries.FailureCriteria) (Pod, bool) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return Pod{}, false
	}
	p := Pod{Key: pod.Namespace + "/" + pod.Name, NotReadySince: pod.CreationTimestamp.Time}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status == corev1.ConditionTrue
			if !c.LastTransitionTime.IsZero() {
				p.NotReadySince = c.LastTransitionTime.Time
			}
		}
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if int(cs.RestartCount) > p.Restarts || p.Container == "" {
			p.Container, p.Restarts = cs.Name, int(cs.RestartCount)
		}
	}
	return p, !p.Ready && f.PodNotReadyAfter > 0 || f.LimitRestarts && p.Restarts > f.MaxContainerRestarts
}

// owner is the kind of the workload controlling pod: OwnerDeployment when
// its controller is a ReplicaSet that a Deployment controls (the
// ReplicaSet's metadata read once), else its controller's kind.
func (r *podReader) owner(ctx context.Context, pod *corev1.Pod) (string, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", nil
	}
	if ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return ref.Kind, nil
	}
	deployed, ok := r.deployed[ref.UID]
	if !ok {
		rs := &metav1.PartialObjectMetadata{}
		rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		switch err := r.api.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, rs); {
		case apierrors.IsNotFound(err):
			return ref.Kind, nil
		case err != nil:
			return "", fmt.Errorf("reading ReplicaSet %s/%s, the owner of pod %s: %w", pod.Namespace, ref.Name, pod.Name, err)
		}
		c := metav1.GetControllerOf(rs)
		deployed = c != nil && c.Kind == OwnerDeployment && strings.HasPrefix(c.APIVersion, "apps/")
		if len(r.deployed) >= maxOwnersKept {
			clear(r.deployed)
		}
		r.deployed[ref.UID] = deployed
	}
	if deployed {
		return OwnerDeployment, nil
	}
	return ref.Kind, nil
}
