package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
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
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// stuckProvisioner reports every group with three drifted in-service
// instances, whatever is terminated: a rotation that makes no progress
// (as an Auto Scaling group whose replacements never launch would).
type stuckProvisioner struct{}

func (stuckProvisioner) Apply(_ context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	obs := &providers.Observation{GroupName: ig.Name, Min: 3, Max: 4, Desired: 3}
	for _, id := range []string{"a", "b", "c"} {
		id = ig.Name + "-" + id
		obs.Instances = append(obs.Instances, providers.Instance{ID: id, ProviderID: "aws:///us-west-2a/" + id,
			LifecycleState: "InService", Healthy: true})
	}
	return obs, nil
}

func (stuckProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}
func (stuckProvisioner) Terminate(context.Context, *v1alpha1.InstanceGroup, string, bool) error {
	return nil
}
func (stuckProvisioner) AddCapacity(context.Context, *v1alpha1.InstanceGroup, int) (int, error) {
	return 0, nil
}

// A group holding the only upgrade slot without progress for the stall
// timeout releases it (Warning Event, condition, metric), its node left
// cordoned is uncordoned, the waiting group gets the slot, and the stalled
// one asks again only one stall timeout later.
func TestStalledRotationReleasesItsSlot(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var objs []client.Object
	groups := map[string]*v1alpha1.InstanceGroup{}
	for _, name := range []string{"stuck", "next"} {
		ig := &v1alpha1.InstanceGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), Generation: 1, Finalizers: []string{Finalizer}},
			Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
		}
		groups[name] = ig
		objs = append(objs, ig)
		for _, id := range []string{"a", "b", "c"} {
			id = name + "-" + id
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + id},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
		}
	}
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	recorder := events.NewFakeRecorder(100)
	drainer := &drain.Drainer{Kube: fake.NewClientset(), Client: c, Timeout: time.Hour, Step: time.Second, Now: clock}
	r := slotReconciler(c, clock, stuckProvisioner{}, 1, drainer, nil, recorder)
	reconcile := func(name string) *v1alpha1.InstanceGroup {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(groups[name])}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
		got := &v1alpha1.InstanceGroup{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(groups[name]), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	upgrading := func(ig *v1alpha1.InstanceGroup) metav1.Condition {
		c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionUpgrading)
		if c == nil {
			t.Fatalf("%s has no Upgrading condition", ig.Name)
		}
		return *c
	}
	node := func(name string) *corev1.Node {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The stuck group takes the slot and cordons its first node; the other
	// waits.
	if cond := upgrading(reconcile("stuck")); cond.Reason != "Rotating" {
		t.Fatalf("stuck: Upgrading %s %s", cond.Reason, cond.Message)
	}
	if !node("stuck-a").Spec.Unschedulable {
		t.Fatal("the first batch's node is not cordoned")
	}
	if cond := upgrading(reconcile("next")); cond.Reason != "WaitingForUpgradeSlot" {
		t.Fatalf("next: Upgrading %s %s", cond.Reason, cond.Message)
	}
	// Passes without progress before the timeout keep the slot.
	now = now.Add(20 * time.Minute)
	reconcile("stuck")
	if got := r.Slots.Holders(); len(got) != 1 || got[0].Name != "stuck" {
		t.Fatalf("holders %v before the stall timeout", got)
	}

	stallsBefore := counter(t)
	now = now.Add(11 * time.Minute)
	stuck := reconcile("stuck")
	cond := upgrading(stuck)
	if cond.Status != metav1.ConditionFalse || cond.Reason != ReasonUpgradeStalled || !cond.LastTransitionTime.Time.Equal(now) {
		t.Errorf("stalled: Upgrading %s %s at %s: %s", cond.Status, cond.Reason, cond.LastTransitionTime, cond.Message)
	}
	if got := counter(t) - stallsBefore; got != 1 {
		t.Errorf("instance_manager_upgrade_stalls_total rose by %v, want 1", got)
	}
	if n := node("stuck-a"); n.Spec.Unschedulable || n.Annotations[drain.AnnotationDrainStarted] != "" {
		t.Errorf("node stuck-a left cordoned (%v) or marked draining (%v) without a slot", n.Spec.Unschedulable, n.Annotations)
	}
	stalledEvent := false
	for len(recorder.Events) > 0 {
		e := <-recorder.Events
		if strings.HasPrefix(e, "Warning "+ReasonUpgradeStalled) && strings.Contains(e, "stuck-a") && strings.Contains(e, "0 updated, 3 drifted") {
			stalledEvent = true
		}
	}
	if !stalledEvent {
		t.Error("no Warning UpgradeStalled Event naming the uncordoned node and the progress")
	}

	// The waiting group gets the slot; the stalled one waits a stall
	// timeout before it asks again, and then waits for the holder.
	if cond := upgrading(reconcile("next")); cond.Reason != "Rotating" {
		t.Fatalf("next after the stall: Upgrading %s %s", cond.Reason, cond.Message)
	}
	now = now.Add(10 * time.Minute)
	if cond := upgrading(reconcile("stuck")); cond.Reason != ReasonUpgradeStalled {
		t.Errorf("stalled group during its wait: Upgrading %s %s", cond.Reason, cond.Message)
	}
	now = now.Add(21 * time.Minute)
	if cond := upgrading(reconcile("stuck")); cond.Reason != "WaitingForUpgradeSlot" || !strings.Contains(cond.Message, "team-a/next") {
		t.Errorf("stalled group after its wait: Upgrading %s %s", cond.Reason, cond.Message)
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 1 || *leases.Items[0].Spec.HolderIdentity != "team-a/next" {
		t.Errorf("slot Leases %v, want one held by team-a/next", leases.Items)
	}
}

// slotReconciler is the Reconciler of the rotation, slot and stall
// tests: prov as the eks provisioner, the rolling update on drainer (and
// drains, when not nil) recording to recorder, upgrade slots kept in
// Leases (at most max at once), a 30-minute stall timeout, time from
// clock.
func slotReconciler(c client.Client, clock func() time.Time, prov providers.Provisioner, max int,
	drainer *drain.Drainer, drains *drain.Drains, recorder *events.FakeRecorder) *Reconciler {
	return &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling: &upgrade.RollingUpdate{Drainer: drainer, Drains: drains, Recorder: recorder, Client: c},
		Slots: &slots.Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return max }, Now: clock,
			StallTimeout: 30 * time.Minute},
		StallTimeout: 30 * time.Minute, Now: clock,
		Recorder: recorder, PollInterval: time.Second, ResyncInterval: time.Minute, backoff: newFailureBackoff(time.Second, time.Minute),
	}
}

// reconcileOnce runs one pass of r for key and returns the group as
// stored after it; an error fails the test.
func reconcileOnce(t *testing.T, r *Reconciler, c client.Client, key client.ObjectKey) *v1alpha1.InstanceGroup {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func counter(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := upgradeStalls.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A group holding a slot whose reconcile keeps failing before its rotation
// can be judged (the cloud refuses its launch template) gives the slot
// back after the stall timeout.
func TestFailingGroupReleasesItsSlotAfterTheStallTimeout(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-web", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
	}
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	recorder := events.NewFakeRecorder(100)
	slots := &slots.Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return 1 }, Now: clock}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: &failingProvisioner{}},
		Slots: slots, StallTimeout: 30 * time.Minute, Now: clock,
		Recorder: recorder, PollInterval: time.Second, ResyncInterval: time.Minute, backoff: newFailureBackoff(time.Second, time.Minute),
	}
	key := client.ObjectKeyFromObject(ig)
	if ok, err := slots.Acquire(ctx, key, ig.UID); err != nil || !ok {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	for _, step := range []struct {
		after time.Duration
		held  bool
	}{{time.Minute, true}, {28 * time.Minute, true}, {time.Minute, false}} {
		now = now.Add(step.after)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		if held := len(slots.Holders()) == 1; held != step.held {
			t.Fatalf("after %s more: holds a slot %v, want %v", step.after, held, step.held)
		}
	}
	found := false
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+ReasonUpgradeStalled) && strings.Contains(e, "CloudError") {
			found = true
		}
	}
	if !found {
		t.Error("no Warning UpgradeStalled Event naming the failure")
	}
}

// A stalled rotation stops the drain of every node it uncordons before the
// uncordon: no eviction follows it (review M2: the drain runner went on
// evicting from a schedulable node for as long as the group waited).
func TestStallStopsTheDrainsOfTheNodesItUncordons(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
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
	// The pod on the first batch's node: its budget refuses every eviction.
	srv := fakeeviction.New(clock, refuseEvery, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"},
		Spec: corev1.PodSpec{NodeName: "stuck-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	// Steps as long as the test: only a stop ends the running one.
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: time.Hour, Now: clock}
	drains := &drain.Drains{Drainer: drainer, Max: 5, Interval: time.Millisecond}
	runDrains(t, drains)
	recorder := events.NewFakeRecorder(100)
	r := slotReconciler(c, clock, stuckProvisioner{}, 1, drainer, drains, recorder)
	key := client.ObjectKeyFromObject(ig)
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}

	reconcile() // takes the slot, cordons stuck-a, hands its drain to the runner
	waitUntil(t, func() bool { return srv.Evictions("apps/web-1") >= 2 }, "the refused eviction to be tried again")
	if got := drains.Draining(key); len(got) != 1 || got[0] != "stuck-a" {
		t.Fatalf("draining %v before the stall, want [stuck-a]", got)
	}

	now = now.Add(31 * time.Minute)
	reconcile() // no progress for the stall timeout: slot released, stuck-a uncordoned
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "stuck-a"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable {
		t.Fatal("stuck-a is still cordoned after the stall")
	}
	if got := drains.Draining(key); len(got) != 0 {
		t.Errorf("after the stall uncordoned stuck-a, its drain still runs: draining %v", got)
	}
	before := srv.Evictions("apps/web-1")
	time.Sleep(1100 * time.Millisecond) // a running drain tries a refused eviction again every second
	if after := srv.Evictions("apps/web-1"); after != before {
		t.Errorf("%d eviction(s) of apps/web-1 from the uncordoned node after the stall", after-before)
	}
}

// A rotation stopped for replacements that never joined
// (status.rotationBatch lists upgrade.MaxNeverJoined of the latest
// version) gives its slot back, stops the drains of the nodes it had
// cordoned before uncordoning them, and says so: Upgrading False
// RotationStopped, state Error.
func TestStoppedRotationStopsItsDrainsAndGivesItsSlotBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
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
	srv := fakeeviction.New(clock, refuseEvery, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"},
		Spec: corev1.PodSpec{NodeName: "stuck-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: time.Hour, Now: clock}
	drains := &drain.Drains{Drainer: drainer, Max: 5, Interval: time.Millisecond}
	runDrains(t, drains)
	recorder := events.NewFakeRecorder(100)
	r := slotReconciler(c, clock, stuckProvisioner{}, 1, drainer, drains, recorder)
	key := client.ObjectKeyFromObject(ig)
	reconcile := func() *v1alpha1.InstanceGroup { return reconcileOnce(t, r, c, key) }

	cur := reconcile() // takes the slot, cordons stuck-a, hands its drain to the runner
	waitUntil(t, func() bool { return srv.Evictions("apps/web-1") >= 2 }, "the refused eviction to be tried again")
	cur.Status.RotationBatch = &v1alpha1.RotationBatch{Since: metav1.NewTime(now), Owed: 1, NeverJoined: []string{"i-1", "i-2", "i-3"}}
	if err := c.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	got := reconcile()
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != upgrade.ReasonRotationStopped ||
		!strings.Contains(cond.Message, "3 replacement instance(s)") || !strings.Contains(cond.Message, "i-1, i-2, i-3") {
		t.Errorf("Upgrading %+v, want False RotationStopped naming the instances", cond)
	}
	if got.Status.CurrentState != v1alpha1.StateError {
		t.Errorf("state %s, want %s", got.Status.CurrentState, v1alpha1.StateError)
	}
	if holders := r.Slots.Holders(); len(holders) != 0 {
		t.Errorf("slot holders %v: a stopped rotation holds none", holders)
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "stuck-a"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable {
		t.Error("stuck-a is still cordoned after the rotation stopped")
	}
	if d := drains.Draining(key); len(d) != 0 {
		t.Errorf("draining %v after the stop", d)
	}
	before := srv.Evictions("apps/web-1")
	time.Sleep(1100 * time.Millisecond)
	if after := srv.Evictions("apps/web-1"); after != before {
		t.Errorf("%d eviction(s) from the uncordoned node after the stop", after-before)
	}
	// Further passes stay stopped and cordon nothing.
	reconcile()
	if err := c.Get(ctx, client.ObjectKey{Name: "stuck-a"}, node); err != nil || node.Spec.Unschedulable {
		t.Errorf("stuck-a cordoned again (err %v)", err)
	}
}
