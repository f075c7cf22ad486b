package termination

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// A pod that tolerates the cordon and comes back to the node after each
// eviction (the scheduler's replacement, on the emptiest node) is evicted
// again before the lifecycle action completes, drain.MaxArrivalEvictions
// times, then left to go with the instance under a DrainPodsLeft Warning:
// the drain's own last listing ignores such returns, so without the
// second reading the instance went with the first one, unwarned (issue
// 36: an app fell below its budget when Auto Scaling terminated nodes).
func TestReturnedPodsAreEvictedBeforeTheActionCompletes(t *testing.T) {
	group := types.NamespacedName{Namespace: "team", Name: "web"}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8", UID: "rs", Controller: ptr.To(true)}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(now), OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       corev1.PodSpec{NodeName: "n1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	first := pod("web-1")
	first.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour)) // there before the drain
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node.DeepCopy(),
		&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: group.Namespace, Name: group.Name}}).Build()
	srv := fakeeviction.New(clock, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }, first, node.DeepCopy())
	var mu sync.Mutex
	var evicted []string
	srv.AfterEviction = func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		evicted = append(evicted, p.Name)
		if err := srv.Add(pod(fmt.Sprintf("web-back-%d", len(evicted)))); err != nil {
			t.Error(err)
		}
	}
	rec := events.NewFakeRecorder(20)
	drainer := &drain.Drainer{Kube: srv.Kube, Client: kube, Timeout: time.Minute, Step: time.Second, Now: clock, Recorder: rec}
	drains := &drain.Drains{Drainer: drainer, Max: 2, Interval: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = drains.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	aws := &fakeActions{}
	c := &Controller{Waits: fixedWaits{{Group: group, ScalingGroup: "team-web", InstanceID: "i-1", ProviderID: providerID}},
		AWS: aws, Client: kube, Drainer: drainer, Drains: drains, Recorder: rec, Heartbeat: 10 * time.Minute, Now: clock}

	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		c.Pass(context.Background())
		if completed, _ := aws.calls(); len(completed) > 0 {
			break
		}
	}
	completed, _ := aws.calls()
	mu.Lock()
	defer mu.Unlock()
	if len(completed) != 1 {
		t.Fatalf("CompleteLifecycleAction calls %q after evictions %q, want 1", completed, evicted)
	}
	if want := 1 + drain.MaxArrivalEvictions; len(evicted) != want {
		t.Errorf("evictions %q, want %d: the pod on the node, then %d of its returns", evicted, want, drain.MaxArrivalEvictions)
	}
	close(rec.Events)
	var warned bool
	for e := range rec.Events {
		warned = warned || strings.Contains(e, drain.ReasonDrainPodsLeft+" ") && strings.Contains(e, fmt.Sprintf("apps/web-back-%d", len(evicted)))
	}
	if !warned {
		t.Errorf("no %s Warning naming the pod left on the node", drain.ReasonDrainPodsLeft)
	}
}
