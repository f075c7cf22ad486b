package instancegroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// surgedLister is a group of four in-service instances (i-0 to i-3), one
// of them surge, whose sizes it reads (min 2, desired 4), and records what
// it terminates.
type surgedLister struct {
	listingProvisioner
	sizes      bool // implements SizeReader (see sizedLister)
	terminated []string
	gone       map[string]bool
}

func (p *surgedLister) Instances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	var out []providers.Instance
	for i := range 4 {
		id := fmt.Sprintf("i-%d", i)
		state := "InService"
		if p.gone[id] {
			state = "Terminating"
		}
		out = append(out, providers.Instance{ID: id, ProviderID: "aws:///us-west-2a/" + id, LifecycleState: state, LaunchTime: time.Now().Add(-time.Hour)})
	}
	return out, nil
}

func (p *surgedLister) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, decrement bool) error {
	p.terminated = append(p.terminated, fmt.Sprintf("%s decrement=%v", id, decrement))
	p.gone[id] = true
	return nil
}

func (p *surgedLister) AddCapacity(context.Context, *v1alpha1.InstanceGroup, int) (int, error) {
	return 0, fmt.Errorf("not expected")
}

type sizedLister struct{ *surgedLister }

func (p sizedLister) Sizes(context.Context, *v1alpha1.InstanceGroup) (int, int, bool, error) {
	return 2, 4 - len(p.terminated), true, nil
}

// A group held by the admission gate with surge capacity recorded gives
// it back while held (issue 26 item 5), through the path a finished
// rotation uses: one node drained, then its instance terminated with a
// capacity decrement, and the record cleared. A provisioner that cannot
// read its sizes without applying the spec keeps the record for later.
func TestAHeldGroupGivesItsSurgeBackThroughTheDrainPath(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		sizes     bool
		wantTerm  int
		wantSurge int
	}{
		{"sizes readable: given back", true, 1, 0},
		{"sizes not readable: kept", false, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer},
					Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: "old"}},
				Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
				Status: v1alpha1.InstanceGroupStatus{SurgeCapacity: 1, Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBoundariesApplied,
					Status: metav1.ConditionFalse, Reason: "Rejected", Message: "quota exceeded", LastTransitionTime: metav1.Now()}}},
			}
			objs := []client.Object{ig}
			for i := range 4 {
				objs = append(objs, readyNode(fmt.Sprintf("node-%d", i), fmt.Sprintf("aws:///us-west-2a/i-%d", i), nil))
			}
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
			st := &store.Store{}
			st.SetValid(cfg, "1")
			recorder := events.NewFakeRecorder(100)
			lister := &surgedLister{gone: map[string]bool{}}
			var prov providers.Provisioner = lister
			if c.sizes {
				prov = sizedLister{lister}
			}
			srv := fakeeviction.New(time.Now, func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete })
			r := &Reconciler{
				Client: cl, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
				Rolling: &upgrade.RollingUpdate{Drainer: &drain.Drainer{Kube: srv.Kube, Client: cl, Timeout: time.Minute, Step: time.Second, Now: time.Now},
					Recorder: recorder, Client: cl},
				Slots: &fakeslots.Slots{Max: func() int { return 1 }}, Recorder: recorder, PollInterval: time.Second, Boundaries: st,
				backoff: newFailureBackoff(time.Second, time.Minute),
			}
			key := client.ObjectKeyFromObject(ig)
			for range 3 {
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			if len(lister.terminated) != c.wantTerm || c.wantTerm > 0 && lister.terminated[0] != "i-0 decrement=true" && lister.terminated[0] != "i-3 decrement=true" {
				t.Fatalf("terminated %v; want %d with a decrement", lister.terminated, c.wantTerm)
			}
			cur := &v1alpha1.InstanceGroup{}
			if err := cl.Get(ctx, key, cur); err != nil {
				t.Fatal(err)
			}
			if cur.Status.SurgeCapacity != c.wantSurge {
				t.Errorf("status.surgeCapacity %d; want %d", cur.Status.SurgeCapacity, c.wantSurge)
			}
			if c.wantTerm > 0 {
				// The instance given back had its node drained first.
				var drained int
				nodes := &corev1.NodeList{}
				if err := cl.List(ctx, nodes); err != nil {
					t.Fatal(err)
				}
				for _, n := range nodes.Items {
					if n.Spec.Unschedulable && n.Annotations[drain.AnnotationSurge] == "true" {
						drained++
					}
				}
				if drained != 1 {
					t.Errorf("%d node(s) cordoned to give surge back; want 1", drained)
				}
			}
		})
	}
}
