package instancegroup

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// oneNodeProvisioner observes every group as one InService instance,
// aws:///us-west-2a/i-<group name>; Delete always succeeds.
type oneNodeProvisioner struct {
	mu      sync.Mutex
	deleted map[string]bool
}

func (p *oneNodeProvisioner) Apply(_ context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	return &providers.Observation{GroupName: ig.Name, Min: 1, Max: 1, Desired: 1, Instances: []providers.Instance{{
		ID: "i-" + ig.Name, ProviderID: "aws:///us-west-2a/i-" + ig.Name, LifecycleState: "InService", Healthy: true, UpToDate: true,
	}}}, nil
}

func (p *oneNodeProvisioner) Delete(_ context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted == nil {
		p.deleted = map[string]bool{}
	}
	p.deleted[ig.Name] = true
	return true, nil
}

// refuseEvery answers every eviction as a PodDisruptionBudget that allows
// none does (429).
func refuseEvery(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Refuse }

func readyNode(name, providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// 50 groups being deleted whose drains a PodDisruptionBudget blocks for
// good do not delay a create in another namespace: their reconciles start
// the drains and return (the drains run in drain.Drains, at most
// --max-concurrent-drains at once), and the new group's reconcile makes
// it Ready while every one of those drains is still blocked.
//
// A controller-level test with a fake provisioner and fake clients (the
// issue asks for 50 groups; 50 groups of real instances in the emulator
// take minutes to create). With drains inline in the reconcile (no
// runner), the first of these reconciles would wait for its drain step
// (an hour here) and the test would fail at its deadline.
func TestBlockedDeleteDrainsDoNotDelayACreate(t *testing.T) {
	const blocked, maxDrains = 50, 5
	var objs []client.Object
	srv := fakeeviction.New(time.Now, refuseEvery)
	for i := range blocked {
		name := fmt.Sprintf("blocked-%02d", i)
		now := metav1.Now()
		objs = append(objs, &v1alpha1.InstanceGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-blocked", Name: name, Generation: 1, Finalizers: []string{Finalizer}, DeletionTimestamp: &now},
			Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
		}, readyNode("node-"+name, "aws:///us-west-2a/i-"+name, map[string]string{
			v1alpha1.LabelInstanceGroup: name, v1alpha1.LabelInstanceGroupNamespace: "team-blocked"}))
		if err := srv.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app-" + name},
			Spec: corev1.PodSpec{NodeName: "node-" + name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}); err != nil {
			t.Fatal(err)
		}
	}
	fresh := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-new", Name: "fresh", Generation: 1},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
	}
	objs = append(objs, fresh, readyNode("node-fresh", "aws:///us-west-2a/i-fresh", nil))
	tried := srv.Nodes
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()

	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: time.Hour, Now: time.Now}
	drains := &drain.Drains{Drainer: drainer, Max: maxDrains, PerGroup: 1}
	runDrains(t, drains)
	ctx := context.Background()
	recorder := events.NewFakeRecorder(1000)
	prov := &oneNodeProvisioner{}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling:  &upgrade.RollingUpdate{Drainer: drainer, Drains: drains, Recorder: recorder, Client: c},
		Slots:    &fakeslots.Slots{Max: func() int { return 5 }},
		Recorder: recorder, PollInterval: time.Second, ResyncInterval: time.Minute,
		backoff: newFailureBackoff(time.Second, time.Minute),
	}
	reconcile := func(ns, name string) ctrl.Result {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		if err != nil {
			t.Errorf("reconcile %s/%s: %v", ns, name, err)
		}
		return res
	}

	// Every deleting group's reconcile returns (twice: start, then read).
	passes := make(chan struct{})
	go func() {
		defer close(passes)
		for range 2 {
			for i := range blocked {
				if res := reconcile("team-blocked", fmt.Sprintf("blocked-%02d", i)); res.RequeueAfter == 0 {
					t.Errorf("blocked-%02d: no requeue while its drain is under way", i)
				}
			}
		}
	}()
	select {
	case <-passes:
	case <-time.After(time.Minute):
		t.Fatal("the reconciles of 50 groups with blocked drains did not return within a minute: a reconcile waits for a drain")
	}
	waitUntil(t, func() bool { return len(tried()) == maxDrains }, "the drain runner to fill its slots")

	// The create: Ready in one reconcile, with every drain still blocked.
	reconcile("team-new", "fresh") // finalizer
	reconcile("team-new", "fresh")
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(fresh), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.CurrentState != v1alpha1.StateReady {
		t.Errorf("the new group is %q, want Ready: %+v", got.Status.CurrentState, got.Status.Conditions)
	}
	if n := len(tried()); n != maxDrains {
		t.Errorf("evictions were tried on %d nodes at once, want --max-concurrent-drains %d", n, maxDrains)
	}
	for i := range blocked {
		ig := &v1alpha1.InstanceGroup{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "team-blocked", Name: fmt.Sprintf("blocked-%02d", i)}, ig); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionDeleting)
		if cond == nil || cond.Reason != "Draining" || ig.Status.CurrentState != v1alpha1.StateDeleting {
			t.Errorf("%s: state %q, Deleting condition %+v, want Deleting/Draining", ig.Name, ig.Status.CurrentState, cond)
		}
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "node-" + ig.Name}, node); err != nil {
			t.Fatal(err)
		}
		if !node.Spec.Unschedulable || node.Annotations[drain.AnnotationDrainStarted] == "" {
			t.Errorf("node of %s is not cordoned for its drain", ig.Name)
		}
	}
	if len(prov.deleted) != 0 {
		t.Errorf("cloud resources deleted before their nodes were drained: %v", prov.deleted)
	}
}

// A deleted group's drain that ends blocked (past the drain timeout) is
// reported on the Deleting condition and in one Warning Event, and
// retried: the cloud resources stay. The force-delete annotation then
// deletes them without a drain.
func TestDeleteBlockedDrainThenForceDelete(t *testing.T) {
	c, srv, req := blockedDelete(t)
	// Inline drains (no runner): each reconcile runs one drain step.
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Minute, Step: 50 * time.Millisecond, Now: time.Now}
	recorder := events.NewFakeRecorder(100)
	prov := &listingProvisioner{}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling: &upgrade.RollingUpdate{Drainer: drainer, Recorder: recorder, Client: c},
		Slots:   &fakeslots.Slots{Max: func() int { return 5 }}, Recorder: recorder, PollInterval: time.Second,
		backoff: newFailureBackoff(time.Second, time.Minute),
	}
	for range 3 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	cur := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), req.NamespacedName, cur); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting)
	if cond == nil || cond.Reason != ReasonDrainBlocked {
		t.Fatalf("Deleting condition %+v, want DrainBlocked", cond)
	}
	for _, want := range []string{"node node-a could not be drained", "apps/app", v1alpha1.AnnotationForceDelete} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q does not name %q", cond.Message, want)
		}
	}
	if prov.deletes != 0 {
		t.Fatal("cloud resources deleted while the drain is blocked")
	}
	if got := drainEvents(recorder, ReasonDrainBlocked); got != 1 {
		t.Errorf("%d DrainBlocked Events for one blocked drain over 3 passes, want 1", got)
	}

	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{v1alpha1.AnnotationForceDelete: "true"}
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if prov.deletes != 1 {
		t.Errorf("force-delete: %d Delete calls, want 1", prov.deletes)
	}
	if err := c.Get(context.Background(), req.NamespacedName, cur); !apierrors.IsNotFound(err) {
		t.Errorf("the group is still there after its forced delete: %v", err)
	}
	if got := drainEvents(recorder, ReasonForceDelete); got != 1 {
		t.Errorf("%d ForceDelete Events, want 1", got)
	}
}

// blockedDelete is a group team/a being deleted whose one node, node-a
// (found by its provider id, no labels: the provisioner's instance), was
// cordoned for its drain an hour ago, past any drain timeout, and carries
// a pod whose every eviction is refused. It returns the client holding
// them, the eviction server and the group's request.
func blockedDelete(t *testing.T) (client.Client, *fakeeviction.Server, ctrl.Request) {
	t.Helper()
	srv := fakeeviction.New(time.Now, refuseEvery, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app"},
		Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	now := metav1.Now()
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer}, DeletionTimestamp: &now},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
	}
	node := readyNode("node-a", "aws:///us-west-2a/i-a", nil)
	node.Spec.Unschedulable = true
	node.Annotations = map[string]string{drain.AnnotationDrainStarted: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig, node).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	return c, srv, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
}

// listingProvisioner lists one instance, i-a, and counts Deletes.
type listingProvisioner struct{ deletes int }

func (p *listingProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	return nil, fmt.Errorf("not expected")
}

func (p *listingProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	p.deletes++
	return true, nil
}

func (p *listingProvisioner) Instances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	return []providers.Instance{{ID: "i-a", ProviderID: "aws:///us-west-2a/i-a", LifecycleState: "InService"}}, nil
}

// drainEvents counts the recorded Events with reason (and drains the
// recorder).
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

// runDrains runs the drain runner until the test ends.
func runDrains(t *testing.T, d *drain.Drains) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = d.Start(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freezingProvisioner lists one instance, i-a, records when it was frozen
// (how many evictions had been asked for by then) and, at each Delete,
// the pods still bound to node-a.
type freezingProvisioner struct {
	srv             *fakeeviction.Server
	freezes         int
	evictionsBefore int // at the first Freeze
	deletes         int
	podsAtDelete    []string
}

func (p *freezingProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	return nil, fmt.Errorf("not expected")
}

func (p *freezingProvisioner) Freeze(context.Context, *v1alpha1.InstanceGroup) error {
	if p.freezes == 0 {
		p.evictionsBefore = len(p.srv.Nodes())
	}
	p.freezes++
	return nil
}

func (p *freezingProvisioner) Delete(ctx context.Context, _ *v1alpha1.InstanceGroup) (bool, error) {
	p.deletes++
	pods, err := p.srv.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
	if err != nil {
		return false, err
	}
	for _, pod := range pods.Items {
		p.podsAtDelete = append(p.podsAtDelete, pod.Namespace+"/"+pod.Name)
	}
	return true, nil
}

func (p *freezingProvisioner) Instances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	return []providers.Instance{{ID: "i-a", ProviderID: "aws:///us-west-2a/i-a", LifecycleState: "InService"}}, nil
}

// A deleted group is frozen before any eviction, and its cloud resources
// are deleted only once every node's pods are gone, read again after the
// drains ended: a pod bound to a drained node afterwards (one tolerating
// the cordon) is evicted first, not killed with the instance (the user
// report of issue 24: two pods still bound to a node that had gone).
func TestDeleteFreezesAndDeletesOnlyEmptyNodes(t *testing.T) {
	ctx := context.Background()
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	srv := fakeeviction.New(time.Now, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }, pod("web-1"))
	now := metav1.Now()
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer}, DeletionTimestamp: &now},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig, readyNode("node-a", "aws:///us-west-2a/i-a", nil)).
		WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Minute, Step: time.Second, Now: time.Now}
	drains := &drain.Drains{Drainer: drainer, Max: 5, Interval: time.Millisecond}
	runDrains(t, drains)
	recorder := events.NewFakeRecorder(100)
	prov := &freezingProvisioner{srv: srv}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling: &upgrade.RollingUpdate{Drainer: drainer, Drains: drains, Recorder: recorder, Client: c},
		Slots:   &fakeslots.Slots{Max: func() int { return 5 }}, Recorder: recorder, PollInterval: time.Second,
		backoff: newFailureBackoff(time.Second, time.Minute),
	}
	key := client.ObjectKeyFromObject(ig)
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}

	reconcile() // freeze, cordon, drain in the background
	if prov.freezes == 0 || prov.evictionsBefore != 0 {
		t.Fatalf("frozen %d time(s), after %d eviction(s): want frozen before any eviction", prov.freezes, prov.evictionsBefore)
	}
	waitUntil(t, func() bool { return len(drains.Draining(key)) == 0 }, "the drain of node-a to end")
	// A replacement lands on the drained node (it tolerates the cordon).
	if err := srv.Add(pod("web-2")); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if prov.deletes != 0 {
		t.Fatalf("cloud resources deleted with pods %v still on node-a", prov.podsAtDelete)
	}
	cur := &v1alpha1.InstanceGroup{}
	if err := c.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting); cond == nil || !strings.Contains(cond.Message, "node-a (pods back on it after its drain: apps/web-2)") {
		t.Errorf("Deleting condition %+v does not name the pod back on node-a", cond)
	}
	waitUntil(t, func() bool { return srv.Evictions("apps/web-2") == 1 && len(drains.Draining(key)) == 0 }, "web-2 to be evicted")
	reconcile()
	if prov.deletes != 1 || len(prov.podsAtDelete) != 0 {
		t.Errorf("%d Delete call(s), pods on node-a at Delete %v; want 1 call and no pod", prov.deletes, prov.podsAtDelete)
	}
}

// A blocked delete drain that the drain runner retries stays reported as
// blocked: the runner hands out a Blocked outcome once and starts the
// node's drain again at the next look, and the Deleting condition once
// went back to Draining for that retry (read there under load by the e2e
// test) and announced the next Blocked outcome in a new Event.
func TestDeleteDrainBlockedStaysReportedWhileRetried(t *testing.T) {
	c, srv, req := blockedDelete(t)
	drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Minute, Step: 20 * time.Millisecond, Now: time.Now}
	drains := &drain.Drains{Drainer: drainer, Max: 5, PerGroup: 1}
	runDrains(t, drains)
	recorder := events.NewFakeRecorder(100)
	prov := &listingProvisioner{}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling: &upgrade.RollingUpdate{Drainer: drainer, Drains: drains, Recorder: recorder, Client: c},
		Slots:   &fakeslots.Slots{Max: func() int { return 5 }}, Recorder: recorder, PollInterval: time.Second,
		backoff: newFailureBackoff(time.Second, time.Minute),
	}
	reason := func() string {
		cur := &v1alpha1.InstanceGroup{}
		if err := c.Get(context.Background(), req.NamespacedName, cur); err != nil {
			t.Fatal(err)
		}
		if cond := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting); cond != nil {
			return cond.Reason
		}
		return ""
	}
	var seen []string
	blockedSince := -1
	for i := 0; i < 100 && (blockedSince < 0 || i < blockedSince+40); i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := reason()
		if len(seen) == 0 || seen[len(seen)-1] != got {
			seen = append(seen, got)
		}
		if got == ReasonDrainBlocked && blockedSince < 0 {
			blockedSince = i
		}
		time.Sleep(10 * time.Millisecond)
	}
	if blockedSince < 0 {
		t.Fatalf("the drain never showed as blocked: Deleting reasons %v", seen)
	}
	if last := seen[len(seen)-1]; len(seen) > 2 || last != ReasonDrainBlocked {
		t.Errorf("Deleting reasons over 40 passes of a retried blocked drain: %v, want [Draining DrainBlocked]", seen)
	}
	if got := drainEvents(recorder, ReasonDrainBlocked); got != 1 {
		t.Errorf("%d DrainBlocked Events for one blocked drain retried over 40 passes, want 1", got)
	}
	if prov.deletes != 0 {
		t.Fatal("cloud resources deleted while the drain is blocked")
	}
}
