package fanout

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
)

func readmitScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// currentGroup returns a store loaded with minimal boundaries and a group
// admitted under them (its boundaries-hash is current).
func currentGroup(t *testing.T) (*store.Store, *v1alpha1.InstanceGroup) {
	t.Helper()
	cfg, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n"})
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team-a", Name: "web",
		Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: cfg.Hash(false)},
	}}
	return st, ig
}

// The fan-out case of issue 19: the InstanceGroup controller adds its
// finalizer between the fan-out's read of a new group and its condition
// write. The write loses the optimistic-lock race; the finalizer update does
// not change annotations, so the watch never brings the group back. The
// reconciler must ask for the retry itself, and the retry must mark the
// group. This interleaving is forced here, so the test is deterministic.
func TestReadmitRetriesAConditionWriteThatLostARace(t *testing.T) {
	st, ig := currentGroup(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	raced := false
	base := fake.NewClientBuilder().WithScheme(readmitScheme(t)).
		WithObjects(ns, ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if !raced {
					raced = true
					other := &v1alpha1.InstanceGroup{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
						return err
					}
					controllerutil.AddFinalizer(other, instancegroup.Finalizer)
					if err := c.Update(ctx, other); err != nil {
						return err
					}
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := &Reconciler{Client: base, Store: st, Recorder: events.NewFakeRecorder(10)}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	if !raced {
		t.Fatal("the test did not inject the concurrent finalizer write")
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("a condition write that lost a race was dropped (result %+v): the group would never get BoundariesApplied", res)
	}
	if c := condition(t, base, ig); c != nil {
		t.Fatalf("condition written despite the conflict: %+v", c)
	}

	// The retry the reconciler asked for marks the group.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("retry: %v", err)
	}
	c := condition(t, base, ig)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Current" {
		t.Fatalf("BoundariesApplied after the retry = %+v, want True/Current", c)
	}
}

// A group in a namespace that the cache has not seen yet is still judged:
// the opt-out list is in the ConfigMap, so no Namespace is read at all.
func TestReadmitReadsANamespaceTheCacheHasNotSeen(t *testing.T) {
	st, ig := currentGroup(t)
	s := readmitScheme(t)
	cached := fake.NewClientBuilder().WithScheme(s).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	r := &Reconciler{Client: cached, Store: st, Recorder: events.NewFakeRecorder(10)}

	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if c := condition(t, cached, ig); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("BoundariesApplied = %+v, want True", c)
	}
}

func condition(t *testing.T, c client.Client, ig *v1alpha1.InstanceGroup) *metav1.Condition {
	t.Helper()
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ig), got); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionBoundariesApplied)
}

// A group carried to new boundaries by an update other than the fan-out's
// own (the InstanceGroup controller adding its finalizer races the fan-out
// under load; both are re-admitted) still gets its BoundariesApplied Event,
// once; a group created under the current boundaries gets none.
func TestReadmitAnnouncesNewBoundariesWhoeverCarriedTheGroupThere(t *testing.T) {
	st, moved := currentGroup(t)
	moved.Status.Conditions = []metav1.Condition{{
		Type: v1alpha1.ConditionBoundariesApplied, Status: metav1.ConditionTrue, Reason: "Current",
		Message: "The spec was computed from the current boundary ConfigMap (boundaries hash old)", LastTransitionTime: metav1.Now(),
	}}
	fresh := moved.DeepCopy()
	fresh.Name, fresh.Status.Conditions = "fresh", nil
	c := fake.NewClientBuilder().WithScheme(readmitScheme(t)).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, moved, fresh).
		WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Store: st, Recorder: rec}

	for range 2 { // the second pass finds nothing to do
		for _, ig := range []*v1alpha1.InstanceGroup{moved, fresh} {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 1 || !strings.Contains(got[0], ReasonBoundariesApplied) {
		t.Fatalf("Events = %q, want one %s (for the moved group only)", got, ReasonBoundariesApplied)
	}
	for _, ig := range []*v1alpha1.InstanceGroup{moved, fresh} {
		if c := condition(t, c, ig); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, st.Get().Config.Hash(false)) {
			t.Errorf("%s: BoundariesApplied = %+v, want True naming the current hash", ig.Name, c)
		}
	}
}

// During a progressive rollout the fan-out moves the groups of started
// waves to the target (an update carrying the target's hash) and only
// marks the others: their revision, the one they wait for, and why.
func TestReadmitFollowsTheRolloutRecord(t *testing.T) {
	oldData := map[string]string{"defaults": "spec:\n  provisioner: eks\n", "rollout": "waves:\n- {name: canary, namespaces: [canary]}\n"}
	newData := map[string]string{"defaults": "spec:\n  provisioner: eks-managed\n", "rollout": oldData["rollout"]}
	oldCfg, err := boundaries.Parse(oldData)
	if err != nil {
		t.Fatal(err)
	}
	newCfg, err := boundaries.Parse(newData)
	if err != nil {
		t.Fatal(err)
	}
	oldRev, newRev := boundaries.Revision(oldData), boundaries.Revision(newData)
	st := &store.Store{}
	st.SetRecord(&record.Record{Target: newRev, Stable: oldRev, Phase: record.PhaseProgressing, Wave: 0,
		Waves: []record.Wave{{Name: "canary", Groups: []record.Group{{Group: "canary/web"}}}, {Name: "rest"}}},
		map[string]*boundaries.Config{oldRev: oldCfg})
	st.SetData(newCfg, "2", newData, newRev)

	group := func(ns string) *v1alpha1.InstanceGroup {
		return &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
			Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: oldCfg.Hash(false)}}}
	}
	canary, later := group("canary"), group("team-b")
	var updated []string
	c := fake.NewClientBuilder().WithScheme(readmitScheme(t)).WithObjects(canary, later).
		WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updated = append(updated, obj.GetNamespace()+" "+obj.GetAnnotations()[v1alpha1.AnnotationBoundariesHash])
			return c.Update(ctx, obj, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Store: st, Recorder: events.NewFakeRecorder(10)}
	for _, ig := range []*v1alpha1.InstanceGroup{canary, later} {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(updated) != 1 || updated[0] != "canary "+newCfg.Hash(false) {
		t.Fatalf("updates %q, want the canary's only, carrying the target's hash", updated)
	}
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(later), got); err != nil {
		t.Fatal(err)
	}
	if b := got.Status.Boundaries; b == nil || b.Revision != oldRev || b.PendingRevision != newRev {
		t.Errorf("held group's status.boundaries = %+v, want %s pending %s", b, oldRev, newRev)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionBoundariesApplied); cond == nil ||
		cond.Status != metav1.ConditionFalse || cond.Reason != store.WaitingForWave {
		t.Errorf("held group's BoundariesApplied = %+v, want False/WaitingForWave", cond)
	}
}

// drainEvents empties the recorder and counts the Events of reason.
func drainEvents(r *events.FakeRecorder, reason string) int {
	n := 0
	for {
		select {
		case e := <-r.Events:
			if strings.Contains(e, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}
