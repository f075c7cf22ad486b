package instancegroup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

// failingDelete is oneNodeProvisioner whose Delete fails with err (nil:
// done).
type failingDelete struct {
	oneNodeProvisioner
	err error
}

func (p *failingDelete) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return p.err == nil, p.err
}

// A deletion that cannot proceed says why in the Deleting condition and a
// Warning Event, and finishes once the cause is gone: the finalizer's
// release refused by the API server (a foreign admission webhook, RBAC),
// or the cloud deletion failing.
func TestDeleteSaysWhyItCannotProceed(t *testing.T) {
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups"}, "a",
		errors.New(`admission webhook "policy.example.com" denied the request: frozen namespace`))
	for _, c := range []struct {
		name       string
		refuse     error // answer to the finalizer's patch
		cloud      error // answer to the provisioner's Delete
		wantReason string
		wantText   string
	}{
		{"finalizer release refused", refusal, nil, ReasonFinalizerRemovalFailed, `policy.example.com" denied the request: frozen namespace`},
		{"cloud deletion failing", nil, errors.New("DeleteAutoScalingGroup: ResourceInUse: scaling activity in progress"), ReasonDeleteFailed, "scaling activity in progress"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			now := metav1.Now()
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", Generation: 1, Finalizers: []string{Finalizer}, DeletionTimestamp: &now},
				Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
			}
			refuse := c.refuse
			c2 := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if refuse != nil {
						return refuse
					}
					return cl.Patch(ctx, obj, patch, opts...)
				}}).Build()
			prov := &failingDelete{err: c.cloud}
			recorder := events.NewFakeRecorder(100)
			r := &Reconciler{
				Client: c2, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
				Slots: &fakeslots.Slots{Max: func() int { return 5 }}, Recorder: recorder, PollInterval: time.Second,
				backoff: newFailureBackoff(time.Second, time.Minute),
			}
			key := client.ObjectKeyFromObject(ig)
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			if c.cloud == nil && (err != nil || res.RequeueAfter == 0) {
				t.Errorf("Reconcile = %+v, %v; want a requeue with backoff and no error", res, err)
			}
			cur := &v1alpha1.InstanceGroup{}
			if err := c2.Get(ctx, key, cur); err != nil {
				t.Fatalf("the group is gone although its deletion could not proceed: %v", err)
			}
			cond := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting)
			if cond == nil || cond.Reason != c.wantReason || !strings.Contains(cond.Message, c.wantText) {
				t.Errorf("Deleting condition %+v; want reason %s naming %q", cond, c.wantReason, c.wantText)
			}
			if n := drainEvents(recorder, c.wantReason); n != 1 {
				t.Errorf("%d %s Event(s), want 1", n, c.wantReason)
			}

			// The cause goes: the next pass deletes the group.
			refuse, prov.err = nil, nil
			prov2 := &oneNodeProvisioner{}
			r.Provisioners[v1alpha1.ProvisionerEKS] = prov2
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			if err := c2.Get(ctx, key, cur); !apierrors.IsNotFound(err) {
				t.Errorf("the group is still stored (%v, finalizers %v) once the cause went", err, cur.Finalizers)
			}
		})
	}
}
