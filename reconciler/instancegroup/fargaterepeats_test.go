package instancegroup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// While the old and the new Fargate profile both match a Deployment's
// pods, EKS may place an evicted pod's replacement on the old profile: it
// is evicted again. Each such pod counts in
// instance_manager_fargate_repeat_evictions_total, and the workload gets
// one Warning Event (review N10).
func TestFargateRepeatedEvictionsAreReported(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	pod := func(name string, created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{"eks.amazonaws.com/fargate-profile": "old", "pod-template-hash": "5d8f"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "api-5d8f", Controller: ptr.To(true), APIVersion: "apps/v1", UID: "rs"}}},
			Spec: corev1.PodSpec{NodeName: "fargate-" + name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	srv := fakeeviction.New(clock, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete })
	created := 0
	add := func(p *corev1.Pod) {
		if err := srv.Add(p); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, readyNode(p.Spec.NodeName, "", nil)); err != nil {
			t.Fatal(err)
		}
	}
	add(pod("api-0", now.Add(-time.Hour)))
	// EKS places each replacement on the old profile again.
	srv.AfterEviction = func(*corev1.Pod) {
		created++
		add(pod(fmt.Sprintf("api-r%d", created), now.Add(time.Second)))
	}
	recorder := events.NewFakeRecorder(100)
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: 20 * time.Millisecond, Now: clock}
	r := &Reconciler{Client: c, Rolling: &upgrade.RollingUpdate{Drainer: drainer, Client: c}, Recorder: recorder, Now: clock}
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: "batch"}}
	before := repeatCount(t, ig)
	for range 3 {
		now = now.Add(time.Minute)
		if _, err := (groupDisruptions{r: r, ig: ig}).EvictPods(ctx, "eks.amazonaws.com/fargate-profile", "old"); err != nil {
			t.Fatal(err)
		}
	}
	if got := repeatCount(t, ig) - before; got != 2 {
		t.Errorf("instance_manager_fargate_repeat_evictions_total rose by %v, want 2 (api-r1 and api-r2 came back to the old profile)", got)
	}
	announced := 0
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+ReasonFargateEvictionRepeated) && strings.Contains(e, "jobs/Deployment/api") {
			announced++
		}
	}
	if announced != 1 {
		t.Errorf("%d %s Event(s) for the Deployment, want 1", announced, ReasonFargateEvictionRepeated)
	}
}

func repeatCount(t *testing.T, ig *v1alpha1.InstanceGroup) float64 {
	t.Helper()
	var m dto.Metric
	if err := fargateRepeatEvictions.WithLabelValues(ig.Namespace, ig.Name).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
