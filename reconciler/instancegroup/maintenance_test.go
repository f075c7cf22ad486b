package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Outside the maintenance windows a drifted group does not start
// rotating: no slot, no cordon, Upgrading says why and until when. Inside
// it the rotation starts; when the window closes the batch in flight
// finishes and no other starts, without the wait counting as a stall.
func TestRotationsStartOnlyInsideMaintenanceWindows(t *testing.T) {
	ctx := context.Background()
	cfg, err := boundaries.Parse(map[string]string{
		"defaults": "spec:\n  provisioner: eks\n",
		"rollout":  "windows: [{start: \"13:00\", duration: 1h}]\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "stuck", UID: types.UID("uid-stuck"), Generation: 1, Finalizers: []string{Finalizer},
			Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: cfg.Hash(false)}},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
	}
	objs := []client.Object{ig}
	for _, id := range []string{"stuck-a", "stuck-b", "stuck-c"} {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + id},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	recorder := events.NewFakeRecorder(100)
	drainer := &drain.Drainer{Kube: fake.NewClientset(), Client: c, Timeout: time.Hour, Step: time.Second, Now: clock}
	r := slotReconciler(c, clock, stuckProvisioner{}, 5, drainer, nil, recorder)
	r.Boundaries = st
	key := client.ObjectKeyFromObject(ig)
	reconcile := func() metav1.Condition {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		got := &v1alpha1.InstanceGroup{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading)
		if cond == nil {
			t.Fatal("no Upgrading condition")
		}
		return *cond
	}
	cordoned := func() []string {
		var out []string
		for _, id := range []string{"stuck-a", "stuck-b", "stuck-c"} {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: id}, n); err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable {
				out = append(out, id)
			}
		}
		return out
	}

	cond := reconcile() // 12:00
	if cond.Reason != ReasonWaitingWindow || !strings.Contains(cond.Message, "the next opens at 2026-11-25T13:00:00Z") {
		t.Fatalf("before the window: Upgrading %s %q; want %s saying when it opens", cond.Reason, cond.Message, ReasonWaitingWindow)
	}
	if len(r.Slots.Holders()) != 0 || len(cordoned()) != 0 {
		t.Fatalf("before the window: holders %v, cordoned %v; want none", r.Slots.Holders(), cordoned())
	}

	now = now.Add(time.Hour) // 13:00
	if cond := reconcile(); cond.Reason != "Rotating" {
		t.Fatalf("in the window: Upgrading %s %q; want Rotating", cond.Reason, cond.Message)
	}
	if got := cordoned(); len(got) != 1 {
		t.Fatalf("in the window: cordoned %v; want the first batch", got)
	}

	now = now.Add(time.Hour) // 14:00: closed, the batch in flight keeps its slot and goes on
	cond = reconcile()
	if len(r.Slots.Holders()) != 1 || len(cordoned()) != 1 || !strings.Contains(cond.Message, "draining stuck-a") {
		t.Fatalf("after the window: holders %v, cordoned %v, Upgrading %s %q; want the batch in flight going on alone", r.Slots.Holders(), cordoned(), cond.Reason, cond.Message)
	}
	now = now.Add(2 * time.Hour) // past the stall timeout, still closed
	if cond := reconcile(); cond.Reason == ReasonUpgradeStalled {
		t.Fatalf("a wait outside the window was judged a stall: %q", cond.Message)
	}
	now = now.Add(21 * time.Hour) // 13:00 next day: the stall clock starts again
	if cond := reconcile(); cond.Reason == ReasonUpgradeStalled || len(r.Slots.Holders()) != 1 {
		t.Fatalf("in the next window: Upgrading %s %q, holders %v; want the rotation going on", cond.Reason, cond.Message, r.Slots.Holders())
	}
}

// A namespace's maintenance narrows the admin's for its groups only: the
// rotation gate (and the managed replacement's message) of a group of
// team-a is held by team-a's freeze while team-b's groups may start.
func TestNamespaceMaintenanceHoldsOnlyItsGroups(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{
		"defaults": "spec:\n  provisioner: eks\n",
		"rollout":  "windows: [{start: \"13:00\", duration: 1h}]\nnamespaceMaintenance: {team-a: {freezes: [{from: \"2026-11-25\", to: \"2026-11-25\"}]}}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	now := time.Date(2026, 11, 25, 13, 30, 0, 0, time.UTC)
	r := &Reconciler{Boundaries: st, Now: func() time.Time { return now }}
	if why := r.outsideWindow("team-b"); why != "" {
		t.Errorf("team-b inside the admin's window: held (%q)", why)
	}
	if why := r.outsideWindow("team-a"); !strings.Contains(why, "in namespace team-a's change freeze 2026-11-25 to 2026-11-25 UTC; changes start again at 2026-11-26T13:00:00Z") {
		t.Errorf("team-a in its freeze: %q; want the namespace's freeze and the next window after it", why)
	}
}
