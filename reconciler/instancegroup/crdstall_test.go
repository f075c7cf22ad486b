package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// A crd-strategy rotation holds its slot under the same stall timeout as
// a rolling update: its custom resource submitted and running, but no
// instance replaced for the timeout, the slot is released (UpgradeStalled)
// and the resource is left to its controller.
func TestCRDRotationStalls(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ruGVK := schema.GroupVersionKind{Group: "upgrademgr.keikoproj.io", Version: "v1alpha1", Kind: "RollingUpgrade"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(ruGVK, meta.RESTScopeNamespace)
	mapper.Add(v1alpha1.GroupVersion.WithKind("InstanceGroup"), meta.RESTScopeNamespace)
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "stuck", UID: "uid-stuck", Generation: 1, Finalizers: []string{Finalizer}},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD,
			CRD: &v1alpha1.CRDUpgradeStrategy{CRDName: "rollingupgrades", StatusJSONPath: "status.currentStatus", StatusSuccessString: "completed", StatusFailureString: "error",
				Spec: "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata: {name: rollup-nodes}\nspec: {}\n"}}},
	}
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithRESTMapper(mapper).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	cfg, err := boundaries.Parse(map[string]string{"crdStrategy": "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy]}]"})
	if err != nil {
		t.Fatal(err)
	}
	bounds := &store.Store{}
	bounds.SetValid(cfg, "1")
	recorder := events.NewFakeRecorder(100)
	slots := &slots.Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return 1 }, Now: clock}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: stuckProvisioner{}},
		CRD:   &upgrade.CRDStrategy{Client: c, Recorder: recorder, Boundaries: bounds},
		Slots: slots, StallTimeout: 30 * time.Minute, Now: clock,
		Recorder: recorder, PollInterval: time.Second, ResyncInterval: time.Minute, backoff: newFailureBackoff(time.Second, time.Minute),
	}
	key := client.ObjectKeyFromObject(ig)
	for i, p := range []struct {
		after time.Duration
		held  bool
	}{{0, true}, {20 * time.Minute, true}, {11 * time.Minute, false}, {10 * time.Minute, false}} {
		now = now.Add(p.after)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		if held := len(slots.Holders()) == 1; held != p.held {
			t.Fatalf("pass %d (+%s): holds its slot %v, want %v", i, p.after, held, p.held)
		}
	}
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading); cond == nil || cond.Reason != ReasonUpgradeStalled {
		t.Errorf("Upgrading %+v, want reason %s", cond, ReasonUpgradeStalled)
	}
	ru := &unstructured.Unstructured{}
	ru.SetGroupVersionKind(ruGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "rollup-nodes"}, ru); err != nil {
		t.Errorf("the submitted RollingUpgrade is gone after the stall: %v", err)
	}
	stalled := false
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, corev1.EventTypeWarning+" "+ReasonUpgradeStalled) {
			stalled = true
		}
	}
	if !stalled {
		t.Error("no Warning UpgradeStalled Event")
	}
}
