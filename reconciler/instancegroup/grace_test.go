package instancegroup

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// An eks rotation whose drain waits on a pod inside a one-hour grace
// period keeps its slot past the 30-minute stall timeout, and is stalled
// once that period has ended with the pod still there (review N14: the
// release used to uncordon at 30 minutes and evict the rescheduled pod
// again at the next attempt).
func TestRotationStallWaitsForTheGracePeriod(t *testing.T) {
	ctx := log.IntoContext(context.Background(), testr.New(t))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "stuck", UID: "uid-stuck", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
	}
	objs := []client.Object{ig}
	for _, id := range []string{"stuck-a", "stuck-b", "stuck-c"} {
		objs = append(objs, readyNode(id, "aws:///us-west-2a/"+id, nil))
	}
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	grace := int64(3600)
	srv := fakeeviction.New(clock, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Terminate },
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "broker-0"},
			Spec: corev1.PodSpec{NodeName: "stuck-a", TerminationGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	recorder := events.NewFakeRecorder(100)
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: 2 * time.Hour, Step: 20 * time.Millisecond, Now: clock}
	r := slotReconciler(c, clock, stuckProvisioner{}, 1, drainer, nil, recorder)
	slots := r.Slots.(*slots.Leases)
	for i, p := range []struct {
		after time.Duration
		held  bool
	}{{0, true}, {time.Minute, true}, {30 * time.Minute, true}, {25 * time.Minute, true}, {5 * time.Minute, false}} {
		now = now.Add(p.after)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}); err != nil {
			t.Fatal(err)
		}
		if held := len(slots.Holders()) == 1; held != p.held {
			t.Fatalf("pass %d (+%s): holds its slot %v, want %v", i, p.after, held, p.held)
		}
	}
}

func TestInGrace(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	pod := func(name, node string, deletion *metav1.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, DeletionTimestamp: deletion, Finalizers: []string{"keep"}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	srv := fakeeviction.New(func() time.Time { return now }, nil,
		pod("running", "n1", nil), pod("past", "n1", at(-time.Minute)), pod("soon", "n1", at(time.Minute)),
		pod("later", "n2", at(time.Hour)), pod("elsewhere", "n3", at(2*time.Hour)))
	r := &Reconciler{Rolling: &upgrade.RollingUpdate{Drainer: &drain.Drainer{Kube: srv.Kube}}}
	for _, tc := range []struct {
		nodes []string
		want  string
	}{
		{nil, ""},
		{[]string{"n1"}, "apps/soon (its grace period ends 2026-11-29T12:01:00Z)"},
		{[]string{"n1", "n2"}, "apps/later (its grace period ends 2026-11-29T13:00:00Z)"},
	} {
		got, err := r.inGrace(context.Background(), tc.nodes, now)
		if err != nil || got != tc.want {
			t.Errorf("inGrace(%v) = %q, %v; want %q", tc.nodes, got, err, tc.want)
		}
	}
}
