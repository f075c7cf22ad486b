package instancegroup

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// activeProvisioner reports an active managed group.
type activeProvisioner struct{}

func (activeProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	return &providers.Observation{GroupName: "web", Min: 1, Max: 3, Managed: true, Active: true}, nil
}

func (activeProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}

// A status write that loses a conflict means the group changed during the
// pass, possibly by another controller's status-only write, which does not
// trigger a reconcile: the group must be reconciled again at once, not at
// the resync (found by test/install's upgrade test: a tenant's maxSize
// change waited 5 minutes).
func TestStatusConflictRequeuesAtOnce(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 2, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
		// Recorded in an earlier pass (recordIdentity): the status
		// writes counted here are the pass's own.
		Status: v1alpha1.InstanceGroupStatus{Identity: &v1alpha1.GroupIdentity{Provisioner: v1alpha1.ProvisionerEKSManaged}},
	}
	conflicts := 1
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).
		WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if conflicts > 0 {
					conflicts--
					return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups"}, obj.GetName(), nil)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: activeProvisioner{}},
		Slots:    &fakeslots.Slots{Max: func() int { return 1 }},
		Recorder: events.NewFakeRecorder(100), PollInterval: time.Second, ResyncInterval: 5 * time.Minute,
		backoff: newFailureBackoff(time.Second, 5*time.Minute),
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != conflictRetry {
		t.Fatalf("after a lost status write: %+v, %v; want a requeue after %s", res, err, conflictRetry)
	}
	res, err = r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != r.ResyncInterval {
		t.Fatalf("the next pass: %+v, %v; want the Ready resync %s", res, err, r.ResyncInterval)
	}
	got := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 2 || got.Status.CurrentState != v1alpha1.StateReady {
		t.Errorf("status after the retry: observedGeneration %d, state %s", got.Status.ObservedGeneration, got.Status.CurrentState)
	}
}
