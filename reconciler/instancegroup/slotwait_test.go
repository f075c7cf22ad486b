package instancegroup

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// Review 2026-11-29 N7: a group waiting for an upgrade slot (or a
// window) is re-checked every WaitingInterval, not every PollInterval; a
// slot this controller frees wakes the waiting groups at once.
func TestGroupsWaitingForASlotAreWokenByReleases(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "waits", Generation: 1}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	waiters := newSlotWaiters()
	keeper := &fakeslots.Slots{Max: func() int { return 1 }}
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), PollInterval: 5 * time.Second, ResyncInterval: time.Hour,
		WaitingInterval: DefaultWaitingInterval, waiters: waiters, backoff: newFailureBackoff(time.Second, time.Minute), Slots: wakingSlots{Keeper: keeper, waiters: waiters}}
	ctx := context.Background()
	cases := []struct {
		progress upgrade.Progress
		want     time.Duration
	}{
		{upgrade.Progress{Waiting: true, Total: 2}, DefaultWaitingInterval},
		{upgrade.Progress{Total: 2, Updated: 1}, 5 * time.Second}, // rotating
		{upgrade.Progress{Waiting: true, OutsideWindow: true, Total: 2}, DefaultWaitingInterval},
	}
	for i, tc := range cases {
		before := ig.DeepCopy()
		res, err := r.report(ctx, before, ig, &providers.Observation{}, tc.progress, 2, 2, capacity{}, true, false)
		if err != nil || res.RequeueAfter != tc.want {
			t.Fatalf("case %d: requeue after %v (%v), want %v", i, res.RequeueAfter, err, tc.want)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ig), ig); err != nil {
			t.Fatal(err)
		}
	}
	holder := types.NamespacedName{Namespace: "team", Name: "rotates"}
	if ok, err := r.Slots.Acquire(ctx, holder, "u"); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if err := r.Slots.Release(ctx, holder, slots.ReasonDone); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-waiters.ch:
		if e.Object != client.ObjectKeyFromObject(ig) {
			t.Fatalf("woke %v, want the waiting group", e.Object)
		}
	default:
		t.Fatal("a released slot woke no waiting group")
	}
	r.waiters.set(client.ObjectKeyFromObject(ig), false) // it took the slot
	if err := r.Slots.Release(ctx, holder, slots.ReasonDone); err != nil {
		t.Fatal(err)
	}
	if len(waiters.ch) != 0 {
		t.Fatalf("%d group(s) woken with none waiting", len(waiters.ch))
	}
}
