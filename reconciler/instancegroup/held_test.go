package instancegroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// A rotating group whose re-admission under new boundaries was refused is
// held, and gives back what it keeps from others (review M3): the node
// its rotation cordoned is uncordoned and its upgrade slot released. A
// group stored without admission is held without reading anything.
func TestAHeldGroupReleasesItsSlotAndUncordonsItsNodes(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n"})
	if err != nil {
		t.Fatal(err)
	}
	refused := metav1.Condition{Type: v1alpha1.ConditionBoundariesApplied, Status: metav1.ConditionFalse, Reason: "Rejected",
		Message: "quota exceeded", LastTransitionTime: metav1.Now()}
	for _, c := range []struct {
		name       string
		hash       string
		wantReason string
		unwound    bool
	}{
		{"re-admission refused", "old", ReasonBoundariesStale, true},
		{"stored without admission", "", ReasonNotAdmitted, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer}},
				Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
				Status:     v1alpha1.InstanceGroupStatus{Conditions: []metav1.Condition{refused}},
			}
			if c.hash != "" {
				ig.Annotations = map[string]string{v1alpha1.AnnotationBoundariesHash: c.hash}
			}
			node := readyNode("node-a", "aws:///us-west-2a/i-a", nil)
			node.Spec.Unschedulable = true
			node.Annotations = map[string]string{drain.AnnotationDrainStarted: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig, node).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
			st := &store.Store{}
			st.SetValid(cfg, "1")
			slots := &fakeslots.Slots{Max: func() int { return 1 }}
			key := client.ObjectKeyFromObject(ig)
			if held, err := slots.Acquire(ctx, key, ig.UID); err != nil || !held {
				t.Fatalf("Acquire = %v, %v", held, err)
			}
			recorder := events.NewFakeRecorder(100)
			drainer := &drain.Drainer{Client: cl, Timeout: time.Minute, Step: time.Second, Now: time.Now}
			r := &Reconciler{
				Client: cl, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: &listingProvisioner{}},
				Rolling: &upgrade.RollingUpdate{Drainer: drainer, Recorder: recorder, Client: cl},
				Slots:   slots, Recorder: recorder, PollInterval: time.Second, Boundaries: st,
				backoff: newFailureBackoff(time.Second, time.Minute),
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			cur := &v1alpha1.InstanceGroup{}
			if err := cl.Get(ctx, key, cur); err != nil {
				t.Fatal(err)
			}
			if rc := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady); rc == nil || rc.Reason != c.wantReason {
				t.Errorf("Ready condition %+v; want reason %s", rc, c.wantReason)
			}
			n := &corev1.Node{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
				t.Fatal(err)
			}
			_, marked := n.Annotations[drain.AnnotationDrainStarted]
			if uncordoned := !n.Spec.Unschedulable && !marked; uncordoned != c.unwound {
				t.Errorf("node-a unschedulable %v, drain-started %v; want uncordoned: %v", n.Spec.Unschedulable, marked, c.unwound)
			}
			if released := len(slots.Holders()) == 0; released != c.unwound {
				t.Errorf("slot holders %v; want released: %v", slots.Holders(), c.unwound)
			}
		})
	}
}

// rotatingLister lists five instances with Ready nodes (i-0 to i-4) and
// one that never joined (i-b), and records what it terminates.
type rotatingLister struct {
	listingProvisioner
	terminated []string
}

func (p *rotatingLister) Instances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	long := time.Now().Add(-time.Hour)
	out := []providers.Instance{{ID: "i-b", ProviderID: "aws:///us-west-2a/i-b", LifecycleState: "InService", LaunchTime: long}}
	for i := range 5 {
		id := fmt.Sprintf("i-%d", i)
		out = append(out, providers.Instance{ID: id, ProviderID: "aws:///us-west-2a/" + id, LifecycleState: "InService", LaunchTime: long})
	}
	return out, nil
}

func (p *rotatingLister) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, decrement bool) error {
	if decrement {
		return fmt.Errorf("node health terminated %s with a decrement", id)
	}
	p.terminated = append(p.terminated, id)
	return nil
}

func (p *rotatingLister) AddCapacity(context.Context, *v1alpha1.InstanceGroup, int) (int, error) {
	return 0, fmt.Errorf("not expected")
}

// A held group keeps its node health (issue 26 item 5): an instance that
// never joined is replaced (terminated without a decrement) while the
// group waits for its re-admission, and the NodesHealthy condition says
// so; the Ready ones are left alone.
func TestAHeldGroupKeepsReplacingUnhealthyInstances(t *testing.T) {
	ctx := context.Background()
	cfg, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n"})
	if err != nil {
		t.Fatal(err)
	}
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer},
			Annotations: map[string]string{v1alpha1.AnnotationBoundariesHash: "old"}},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
		Status: v1alpha1.InstanceGroupStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBoundariesApplied,
			Status: metav1.ConditionFalse, Reason: "Rejected", Message: "quota exceeded", LastTransitionTime: metav1.Now()}}},
	}
	objs := []client.Object{ig}
	for i := range 5 {
		objs = append(objs, readyNode(fmt.Sprintf("node-%d", i), fmt.Sprintf("aws:///us-west-2a/i-%d", i), nil))
	}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	st := &store.Store{}
	st.SetValid(cfg, "1")
	recorder := events.NewFakeRecorder(100)
	prov := &rotatingLister{}
	r := &Reconciler{
		Client: cl, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
		Rolling: &upgrade.RollingUpdate{Drainer: &drain.Drainer{Client: cl, Timeout: time.Minute, Step: time.Second, Now: time.Now}, Recorder: recorder, Client: cl},
		Slots:   &fakeslots.Slots{Max: func() int { return 1 }}, Recorder: recorder, PollInterval: time.Second, Boundaries: st,
		NodeHealth: &nodehealth.Repairer{Recorder: recorder, DrainAnnotation: drain.AnnotationDrainStarted},
		backoff:    newFailureBackoff(time.Second, time.Minute),
	}
	key := client.ObjectKeyFromObject(ig)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if len(prov.terminated) != 1 || prov.terminated[0] != "i-b" {
		t.Errorf("terminated %v; want the instance that never joined, i-b", prov.terminated)
	}
	cur := &v1alpha1.InstanceGroup{}
	if err := cl.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	if rc := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady); rc == nil || rc.Reason != ReasonBoundariesStale {
		t.Errorf("Ready condition %+v; want the hold (%s)", rc, ReasonBoundariesStale)
	}
	if hc := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionNodesHealthy); hc == nil || hc.Reason != nodehealth.ConditionReasonRepairing {
		t.Errorf("NodesHealthy condition %+v; want %s", hc, nodehealth.ConditionReasonRepairing)
	}
	if n := drainEvents(recorder, nodehealth.EventNodeUnhealthy); n != 1 {
		t.Errorf("%d %s Events; want 1", n, nodehealth.EventNodeUnhealthy)
	}
}
