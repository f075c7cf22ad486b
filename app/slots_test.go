package app

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Missing Lease RBAC makes the controller not ready, naming the verbs
// and the namespace; it is asked again at most once a minute, and once
// granted the controller is ready.
func TestUpgradeSlotsNotReadyWithoutLeaseRBAC(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"create": true, "list": true}
	reviews := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			r, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return cl.Create(ctx, obj, opts...)
			}
			reviews++
			a := r.Spec.ResourceAttributes
			r.Status.Allowed = allowed[a.Verb] && a.Group == "coordination.k8s.io" && a.Resource == "leases" && a.Namespace == "instance-manager"
			return nil
		},
	}).Build()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	access := &slotAccess{client: c, namespace: "instance-manager", every: time.Minute, now: func() time.Time { return now }}
	check := access.checker()

	err := check(nil)
	if err == nil || !strings.Contains(err.Error(), "may not update, delete coordination.k8s.io Leases in namespace instance-manager") {
		t.Fatalf("without update and delete: %v; want not ready, naming the verbs and the namespace", err)
	}
	allowed["update"], allowed["delete"] = true, true
	if err := check(nil); err == nil || reviews != 4 {
		t.Fatalf("within the minute: %v after %d reviews; want the last answer, not asked again", err, reviews)
	}
	now = now.Add(time.Minute)
	if err := check(nil); err != nil {
		t.Fatalf("once granted: %v", err)
	}
	if err := check(nil); err != nil || reviews != 8 {
		t.Fatalf("ready: %v after %d reviews; want ready and not asked again", err, reviews)
	}
}
