package fanout

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestReadmitRetry(t *testing.T) {
	for _, c := range []struct {
		refusedFor, want time.Duration
	}{
		{0, readmitRetryMin},
		{10 * time.Second, readmitRetryMin},
		{2 * time.Minute, 2 * time.Minute},
		{time.Hour, readmitRetryMax},
	} {
		if got := readmitRetry(c.refusedFor); got != c.want {
			t.Errorf("readmitRetry(%s) = %s, want %s", c.refusedFor, got, c.want)
		}
	}
}

// A refused re-admission is retried with backoff (review M3: it waited
// for the next boundary change, which a loosened quota is not), with one
// Warning Event per refusal, not per attempt; once the cause is gone the
// retry re-admits the group.
func TestARefusedReadmissionIsRetried(t *testing.T) {
	st, ig := currentGroup(t)
	ig.Annotations[v1alpha1.AnnotationBoundariesHash] = "old"
	refuse := true
	updates := 0
	cl := fake.NewClientBuilder().WithScheme(readmitScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			if refuse {
				return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups"}, obj.GetName(),
					errors.New("quota exceeded: spec.eks.maxSize: 3 is above quotas.namespaces.team-a.maxSize (2)"))
			}
			return c.Update(ctx, obj, opts...)
		}}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: cl, Store: st, Recorder: recorder}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}

	for attempt := 1; attempt <= 2; attempt++ {
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if res.RequeueAfter < readmitRetryMin || res.RequeueAfter > readmitRetryMax {
			t.Errorf("attempt %d: requeue after %s; want a retry within [%s, %s]", attempt, res.RequeueAfter, readmitRetryMin, readmitRetryMax)
		}
	}
	if n := drainEvents(recorder, ReasonBoundariesRejected); n != 1 {
		t.Errorf("%d %s Event(s) for one refusal tried twice, want 1", n, ReasonBoundariesRejected)
	}
	if c := condition(t, cl, ig); c == nil || c.Reason != "Rejected" {
		t.Errorf("BoundariesApplied = %+v, want Rejected", c)
	}

	refuse = false // the admin loosens the quota: the boundaries hash does not change
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	cur := &v1alpha1.InstanceGroup{}
	if err := cl.Get(context.Background(), req.NamespacedName, cur); err != nil {
		t.Fatal(err)
	}
	if cur.Annotations[v1alpha1.AnnotationBoundariesHash] == "old" || updates != 3 {
		t.Errorf("after the cause went: hash %q after %d update(s); want the group re-admitted by the third", cur.Annotations[v1alpha1.AnnotationBoundariesHash], updates)
	}
}
