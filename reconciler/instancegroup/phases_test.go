package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// Focused tests of the phases of Reconcile (reconcile.go), each run on a
// scope as Reconcile would hand it.

// phaseGroup is a stored group in namespace team-a.
func phaseGroup(provisioner string, finalizers ...string) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, Finalizers: finalizers},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: provisioner},
	}
}

// phaseReconciler has a fake client holding ig (status subresource on);
// funcs, when set, intercept its calls.
func phaseReconciler(t *testing.T, ig *v1alpha1.InstanceGroup, funcs *interceptor.Funcs) (*Reconciler, client.Client) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{})
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	return &Reconciler{
		Client: c, Recorder: events.NewFakeRecorder(10), backoff: newFailureBackoff(0, 0),
		Slots: &fakeslots.Slots{Max: func() int { return 5 }}, PollInterval: time.Second, ResyncInterval: time.Minute,
	}, c
}

func scopeOf(t *testing.T, c client.Client, ig *v1alpha1.InstanceGroup) *scope {
	t.Helper()
	stored := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ig), stored); err != nil {
		t.Fatal(err)
	}
	return &scope{key: client.ObjectKeyFromObject(ig), ig: stored, before: stored.DeepCopy()}
}

func TestCountInstances(t *testing.T) {
	ready := func(id string) *corev1.Node { return readyNode(id, "aws:///a/"+id, nil) }
	notReady := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///a/i-2"}}
	in := func(id, state string, weight int) providers.Instance {
		return providers.Instance{ID: id, ProviderID: "aws:///a/" + id, LifecycleState: state, Weight: weight}
	}
	for _, c := range []struct {
		name                  string
		instances             []providers.Instance
		nodes                 map[string]*corev1.Node
		inService, readyNodes int
		units                 capacity
	}{
		{name: "none", nodes: map[string]*corev1.Node{}},
		{
			name:      "one Ready, one NotReady, one without a node, one pending",
			instances: []providers.Instance{in("i-1", "InService", 0), in("i-2", "InService", 0), in("i-3", "InService", 0), in("i-4", "Pending", 0)},
			nodes:     map[string]*corev1.Node{"aws:///a/i-1": ready("i-1"), "aws:///a/i-2": notReady, "aws:///a/i-4": ready("i-4")},
			inService: 3, readyNodes: 1, units: capacity{inService: 3, ready: 1},
		},
		{
			name:      "weighted: units count the weights",
			instances: []providers.Instance{in("i-1", "InService", 4), in("i-2", "InService", 2)},
			nodes:     map[string]*corev1.Node{"aws:///a/i-1": ready("i-1")},
			inService: 2, readyNodes: 1, units: capacity{inService: 6, ready: 4, weighted: true},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			inService, readyNodes, units := countInstances(c.instances, c.nodes)
			if inService != c.inService || readyNodes != c.readyNodes || units != c.units {
				t.Errorf("countInstances = %d, %d, %+v; want %d, %d, %+v", inService, readyNodes, units, c.inService, c.readyNodes, c.units)
			}
		})
	}
}

func TestResolveProvisioner(t *testing.T) {
	eks := &failingProvisioner{}
	for _, c := range []struct {
		name        string
		provisioner string
		deleting    bool
		wantEnd     bool
		wantProv    providers.Provisioner
	}{
		{name: "eks-cf is served by eks", provisioner: v1alpha1.ProvisionerEKSCF, wantProv: eks},
		{name: "eks", provisioner: v1alpha1.ProvisionerEKS, wantProv: eks},
		{name: "unknown: an error on the group", provisioner: "eks-nope", wantEnd: true},
		{name: "unknown while deleting: the deletion goes on", provisioner: "eks-nope", deleting: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ig := phaseGroup(c.provisioner, Finalizer)
			r, cl := phaseReconciler(t, ig, nil)
			r.Provisioners = map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: eks}
			s := scopeOf(t, cl, ig)
			if c.deleting {
				s.ig.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			res, err := r.resolveProvisioner(context.Background(), s)
			if err != nil || (res != nil) != c.wantEnd {
				t.Fatalf("resolveProvisioner = %v, %v; want the pass to end: %v", res, err, c.wantEnd)
			}
			if s.prov != c.wantProv {
				t.Errorf("provisioner %v, want %v", s.prov, c.wantProv)
			}
			if !c.wantEnd {
				return
			}
			stored := &v1alpha1.InstanceGroup{}
			if err := cl.Get(context.Background(), s.key, stored); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(stored.Status.Conditions, v1alpha1.ConditionReady)
			if cond == nil || cond.Reason != "UnknownProvisioner" || !strings.Contains(cond.Message, `"eks-nope"`) || !strings.Contains(cond.Message, "served: eks") {
				t.Errorf("Ready condition %+v, want UnknownProvisioner naming eks-nope and the served ones", cond)
			}
		})
	}
}

func TestAddFinalizer(t *testing.T) {
	conflict := &interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		return apierrors.NewConflict(schema.GroupResource{Group: "instancemgr.keikoproj.io", Resource: "instancegroups"}, obj.GetName(), nil)
	}}
	for _, c := range []struct {
		name        string
		finalizers  []string
		funcs       *interceptor.Funcs
		wantRequeue time.Duration
		wantEnd     bool
	}{
		{name: "already there: nothing written", finalizers: []string{Finalizer}},
		{name: "added and stored", finalizers: nil},
		{name: "a conflict retries soon", funcs: conflict, wantEnd: true, wantRequeue: 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ig := phaseGroup(v1alpha1.ProvisionerEKS, c.finalizers...)
			r, cl := phaseReconciler(t, ig, c.funcs)
			s := scopeOf(t, cl, ig)
			res, err := r.addFinalizer(context.Background(), s)
			if err != nil || (res != nil) != c.wantEnd || (res != nil && res.RequeueAfter != c.wantRequeue) {
				t.Fatalf("addFinalizer = %v, %v; want the pass to end: %v (requeue %s)", res, err, c.wantEnd, c.wantRequeue)
			}
			if c.wantEnd {
				return
			}
			stored := &v1alpha1.InstanceGroup{}
			if err := cl.Get(context.Background(), s.key, stored); err != nil {
				t.Fatal(err)
			}
			if len(stored.Finalizers) != 1 || stored.Finalizers[0] != Finalizer || len(s.before.Finalizers) != 1 {
				t.Errorf("stored finalizers %v, scope's base %v; want [%s] in both", stored.Finalizers, s.before.Finalizers, Finalizer)
			}
		})
	}
}

func TestRotate(t *testing.T) {
	upToDate := providers.Instance{ID: "i-1", ProviderID: "aws:///a/i-1", LifecycleState: "InService", UpToDate: true}
	drifted := providers.Instance{ID: "i-2", ProviderID: "aws:///a/i-2", LifecycleState: "InService"}
	for _, c := range []struct {
		name        string
		obs         providers.Observation
		surge       int
		wantRelease bool
		wantDone    bool
		wantFailure string // the Ready condition's message holds it
	}{
		{name: "up to date: done, the slot released", obs: providers.Observation{Instances: []providers.Instance{upToDate}}, wantRelease: true, wantDone: true},
		{name: "managed, active: done", obs: providers.Observation{Managed: true, Active: true}, wantRelease: true, wantDone: true},
		{
			name: "drifted under a provisioner that cannot rotate: UpgradeFailed",
			obs:  providers.Observation{Instances: []providers.Instance{upToDate, drifted}}, wantFailure: "cannot rotate instances",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ig := phaseGroup(v1alpha1.ProvisionerEKS, Finalizer)
			r, cl := phaseReconciler(t, ig, nil)
			s := scopeOf(t, cl, ig)
			s.name, s.prov = v1alpha1.ProvisionerEKS, &failingProvisioner{}
			obs := c.obs
			s.obs = &obs
			res, err := r.rotate(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantFailure == "" {
				if res != nil || s.releaseSlot != c.wantRelease || s.progress.Done != c.wantDone {
					t.Errorf("rotate = %v, release %v, done %v; want the pass to go on, release %v, done %v", res, s.releaseSlot, s.progress.Done, c.wantRelease, c.wantDone)
				}
				return
			}
			if res == nil {
				t.Fatal("the pass went on after a failed rotation")
			}
			stored := &v1alpha1.InstanceGroup{}
			if err := cl.Get(context.Background(), s.key, stored); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(stored.Status.Conditions, v1alpha1.ConditionReady)
			if cond == nil || cond.Reason != "UpgradeFailed" || !strings.Contains(cond.Message, c.wantFailure) {
				t.Errorf("Ready condition %+v, want UpgradeFailed with %q", cond, c.wantFailure)
			}
		})
	}
}
