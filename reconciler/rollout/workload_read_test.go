package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// countingReader counts pod Lists.
type countingReader struct {
	client.Reader
	lists int
}

func (c *countingReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if _, ok := l.(*corev1.PodList); ok {
		c.lists++
	}
	return c.Reader.List(ctx, l, opts...)
}

// The reader lists the pods of the judged groups' new nodes only, keeps
// those of Deployments (through their ReplicaSet) and StatefulSets that
// may fail, and reads a group again only when due.
func TestReadPodsOfNewNodes(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(name string, created time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{v1alpha1.LabelInstanceGroup: "a", v1alpha1.LabelInstanceGroupNamespace: "canary"}}}
	}
	owned := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		api := "apps/v1"
		return []metav1.OwnerReference{{APIVersion: api, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	pod := func(name, node string, owners []metav1.OwnerReference, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "canary", Name: name, OwnerReferences: owners},
			Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(start.Add(time.Minute))}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 2}, {Name: "sidecar", RestartCount: 7}}}}
	}
	objs := []client.Object{
		node("old-1", start.Add(-time.Hour)), node("new-1", start.Add(time.Second)),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "canary", Name: "web-rs", UID: "rs-web", OwnerReferences: owned("Deployment", "web", "d-web")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "canary", Name: "bare-rs", UID: "rs-bare"}},
		pod("web-1", "new-1", owned("ReplicaSet", "web-rs", "rs-web"), false),
		pod("web-2", "new-1", owned("ReplicaSet", "web-rs", "rs-web"), true), // Ready, restarts within the limit
		pod("bare-1", "new-1", owned("ReplicaSet", "bare-rs", "rs-bare"), false),
		pod("ds-1", "new-1", owned("DaemonSet", "agent", "ds"), false),
		pod("db-0", "new-1", owned("StatefulSet", "db", "ss"), false),
		pod("old-web", "old-1", owned("ReplicaSet", "web-rs", "rs-web"), false),
	}
	kube := fake.NewClientBuilder().WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	api := &countingReader{Reader: kube}
	pol := &boundaries.RolloutPolicy{Failure: boundaries.FailureCriteria{PodNotReadyAfter: 3 * time.Minute, MaxContainerRestarts: 10, LimitRestarts: true}}
	prev := &record.Record{Target: "new", Phase: record.PhaseProgressing, Wave: 0, Waves: []record.Wave{{Name: "canary", StartedAt: ptr.To(metav1.NewTime(start)),
		Groups: []record.Group{{Group: "canary/a", State: record.GroupRotating}}}}}
	groups := []Group{{Key: "canary/a", AtTarget: true}, {Key: "team-b/b"}}
	r := newPodReader(api)
	ctx := context.Background()
	now := start.Add(2 * time.Minute)

	r.readPods(ctx, kube, prev, pol, "new", groups, now)
	var got []string
	for _, p := range groups[0].Pods {
		got = append(got, p.Key+"@"+p.Node+" "+p.Owner+" "+p.Container)
	}
	if strings.Join(got, ", ") != "canary/db-0@new-1 StatefulSet sidecar, canary/web-1@new-1 Deployment sidecar" || api.lists != 1 {
		t.Fatalf("pods %v after %d list(s); want web-1 and db-0 of new-1, in one list", got, api.lists)
	}
	if groups[1].Pods != nil {
		t.Error("a group of no judged wave got pods")
	}

	// Within podsEvery and no verdict due: no read, the last one is used.
	groups[0].Pods = nil
	r.readPods(ctx, kube, prev, pol, "new", groups, now.Add(10*time.Second))
	if api.lists != 1 || len(groups[0].Pods) != 2 {
		t.Fatalf("%d list(s), %d pod(s): want the last read reused", api.lists, len(groups[0].Pods))
	}
	// A pod's verdict is due (not Ready since 12:01, limit 3m): read again.
	r.readPods(ctx, kube, prev, pol, "new", groups, start.Add(4*time.Minute+time.Second))
	if api.lists != 2 {
		t.Fatalf("%d list(s): want a read when a verdict is due", api.lists)
	}
	// The soak ended after the last read: read again, and say when.
	at := start.Add(4*time.Minute + 20*time.Second)
	prev.Waves[0].HealthyAt = ptr.To(metav1.NewTime(start.Add(4*time.Minute + 5*time.Second)))
	prev.Waves[0].Soak = metav1.Duration{Duration: 10 * time.Second}
	r.readPods(ctx, kube, prev, pol, "new", groups, at)
	if api.lists != 3 || !groups[0].PodsReadAt.Equal(at) {
		t.Fatalf("%d list(s), read at %s: want a read once the soak ended", api.lists, groups[0].PodsReadAt)
	}
	// Criteria without pods, or the wave done: nothing read, nothing kept.
	r.readPods(ctx, kube, prev, &boundaries.RolloutPolicy{}, "new", groups, start.Add(time.Hour))
	if api.lists != 3 || len(r.groups) != 0 {
		t.Fatalf("%d list(s), %d group(s) kept: want none without workload criteria", api.lists, len(r.groups))
	}
}
