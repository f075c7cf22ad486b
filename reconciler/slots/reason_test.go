package slots

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// A release is counted once, by its reason, and only when the group held
// a slot: giving back a slot not held (every waiting pass does) counts
// nothing.
func TestReleaseCountsTheReasonOfSlotsHeld(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a, b := types.NamespacedName{Namespace: "team-a", Name: "a"}, types.NamespacedName{Namespace: "team-b", Name: "b"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}},
		&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}).Build()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return 2 }, Now: func() time.Time { return now }}
	count := func(r Reason) float64 {
		var m dto.Metric
		if err := releases.WithLabelValues(string(r)).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	stalled, deleted := count(ReasonStalled), count(ReasonDeleted)
	for _, k := range []types.NamespacedName{a, b} {
		if ok, err := s.Acquire(ctx, k, ""); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", k, ok, err)
		}
	}
	for _, step := range []struct {
		key    types.NamespacedName
		reason Reason
	}{{a, ReasonStalled}, {a, ReasonStalled}, {b, ReasonDeleted}, {b, ReasonDeleted}} {
		if err := s.Release(ctx, step.key, step.reason); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(ReasonStalled) - stalled; got != 1 {
		t.Errorf("stalled releases counted %v, want 1 (the second release held nothing)", got)
	}
	if got := count(ReasonDeleted) - deleted; got != 1 {
		t.Errorf("deleted releases counted %v, want 1", got)
	}
	if len(s.Holders()) != 0 {
		t.Errorf("holders after the releases: %v", s.Holders())
	}
}
