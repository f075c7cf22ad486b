package instancegroup

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// stuckLister is stuckProvisioner that also lists its instances without
// applying the spec (providers.InstanceLister), as a held group is read.
type stuckLister struct{ stuckProvisioner }

func (s stuckLister) Instances(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	obs, err := s.Apply(ctx, ig)
	return obs.Instances, err
}

// In every state where a drifted group holds no upgrade slot (waiting
// for one, outside the maintenance windows, released for a stall,
// stopped, held by the admission gate) the group gives back the drains
// its rotation started, and only those (review N1): a node a spot
// interruption is draining stays cordoned, its drain keeps running, and
// it keeps its owner.
func TestAGroupWithoutASlotReleasesOnlyItsRotationsDrains(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	windows, err := boundaries.Parse(map[string]string{
		"defaults": "spec:\n  provisioner: eks\n",
		"rollout":  "windows: [{start: \"13:00\", duration: 1h}]\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *boundaries.Config
		// hash is the group's boundaries hash annotation ("": cfg's).
		hash string
		// prepare sets the state up before the pass.
		prepare func(ig *v1alpha1.InstanceGroup, slots *slots.Leases)
	}{
		{name: "waiting for an upgrade slot", cfg: plain, prepare: func(_ *v1alpha1.InstanceGroup, slots *slots.Leases) {
			if held, err := slots.Acquire(context.Background(), types.NamespacedName{Namespace: "team-b", Name: "other"}, "uid-other"); err != nil || !held {
				t.Fatalf("the other group's Acquire = %v, %v", held, err)
			}
		}},
		{name: "outside the maintenance windows", cfg: windows},
		{name: "released for a stall", cfg: plain, prepare: func(ig *v1alpha1.InstanceGroup, _ *slots.Leases) {
			ig.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionFalse,
				Reason: ReasonUpgradeStalled, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
		}},
		{name: "stopped after replacements that never joined", cfg: plain, prepare: func(ig *v1alpha1.InstanceGroup, _ *slots.Leases) {
			ig.Status.RotationBatch = &v1alpha1.RotationBatch{NeverJoined: []string{"i-x", "i-y", "i-z"}}
		}},
		{name: "held by the admission gate", cfg: plain, hash: "old", prepare: func(ig *v1alpha1.InstanceGroup, _ *slots.Leases) {
			ig.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBoundariesApplied, Status: metav1.ConditionFalse,
				Reason: "Rejected", Message: "quota exceeded", LastTransitionTime: metav1.NewTime(now)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := func() time.Time { return now }
			hash := tc.hash
			if hash == "" {
				hash = tc.cfg.Hash(false)
			}
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "stuck", UID: "uid-stuck", Generation: 1, Finalizers: []string{Finalizer},
					Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: hash}},
				Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
			}
			// The group that holds the only slot while this one waits.
			other := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "other", UID: "uid-other"}}
			objs := []client.Object{ig, other}
			for _, id := range []string{"stuck-a", "stuck-b", "stuck-c"} {
				objs = append(objs, readyNode(id, "aws:///us-west-2a/"+id, nil))
			}
			c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
			// The pods on the two cordoned nodes: their budgets refuse
			// every eviction, so both drains keep running.
			srv := fakeeviction.New(clock, refuseEvery,
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-a"}, Spec: corev1.PodSpec{NodeName: "stuck-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-b"}, Spec: corev1.PodSpec{NodeName: "stuck-b"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
			drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: time.Hour, Now: clock}
			drains := &drain.Drains{Drainer: drainer, Max: 5, Interval: time.Millisecond}
			runDrains(t, drains)
			slots := &slots.Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return 1 }, Now: clock,
				StallTimeout: 30 * time.Minute}
			if tc.prepare != nil {
				tc.prepare(ig, slots)
				if err := c.Status().Update(ctx, ig); err != nil {
					t.Fatal(err)
				}
			}
			st := &store.Store{}
			st.SetValid(tc.cfg, "1")
			r := slotReconciler(c, clock, stuckLister{}, 1, drainer, drains, events.NewFakeRecorder(100))
			r.Slots, r.Boundaries = slots, st
			key := client.ObjectKeyFromObject(ig)
			node := func(name string) *corev1.Node {
				n := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			// stuck-a: the rotation's own drain, from an earlier pass;
			// stuck-b: EC2's spot interruption warning, two minutes
			// before the instance is reclaimed.
			for name, owner := range map[string]drain.Owner{"stuck-a": drain.OwnerRotation, "stuck-b": drain.OwnerInterruption} {
				n := node(name)
				if err := drainer.Start(ctx, n, owner); err != nil {
					t.Fatal(err)
				}
				poll := drains.Poll
				if owner == drain.OwnerInterruption {
					poll = drains.PollHeld
				}
				if _, _, err := poll(ctx, key, n); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, func() bool { return srv.Evictions("apps/web-a") >= 1 && srv.Evictions("apps/web-b") >= 1 }, "both drains to run")

			for range 2 { // every pass, not only the first
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			if a := node("stuck-a"); a.Spec.Unschedulable || drain.Marked(a) {
				t.Errorf("the rotation's own drain of stuck-a was not given back: unschedulable %v, annotations %v", a.Spec.Unschedulable, a.Annotations)
			}
			b := node("stuck-b")
			if !b.Spec.Unschedulable || drain.OwnerOf(b) != drain.OwnerInterruption {
				t.Fatalf("the interruption's drain of stuck-b was undone: unschedulable %v, annotations %v", b.Spec.Unschedulable, b.Annotations)
			}
			if got := drains.Draining(key); len(got) != 1 || got[0] != "stuck-b" {
				t.Errorf("drains running %v, want only the interruption's [stuck-b]", got)
			}
			before := srv.Evictions("apps/web-b")
			waitUntil(t, func() bool { return srv.Evictions("apps/web-b") > before }, "the interruption's drain to go on evicting from stuck-b")
		})
	}
}
