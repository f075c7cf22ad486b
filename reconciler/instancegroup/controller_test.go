package instancegroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// failingProvisioner fails every Apply with a new AWS request id, as real
// AWS errors do.
type failingProvisioner struct{ calls int }

func (p *failingProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	p.calls++
	return nil, fmt.Errorf("operation error Auto Scaling: CreateAutoScalingGroup, https response error StatusCode: 400, RequestID: req-%04d, api error ValidationError: no such launch template", p.calls)
}

func (p *failingProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}

// A group whose cloud call keeps failing, with an error text that changes
// on every call, must not hot-loop (issue 14, review finding 1): the Ready
// condition is written once (its message has no request id), the status
// write does not re-trigger the controller, and the retries back off.
func TestPersistentCloudErrorBacksOffAndWritesStatusOnce(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
		// Recorded in an earlier pass (recordIdentity): the status
		// writes counted here are the pass's own.
		Status: v1alpha1.InstanceGroupStatus{Identity: &v1alpha1.GroupIdentity{Provisioner: v1alpha1.ProvisionerEKSManaged}},
	}
	statusWrites := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).
		WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				statusWrites++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	prov := &failingProvisioner{}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: prov},
		Recorder: events.NewFakeRecorder(100), PollInterval: time.Second, ResyncInterval: time.Minute,
		backoff: newFailureBackoff(time.Second, 5*time.Minute),
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}

	var delays []time.Duration
	var before, after *v1alpha1.InstanceGroup
	for i := range 6 {
		before = after
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("reconcile %d returned an error (retried by the rate limiter, not the backoff): %v", i, err)
		}
		delays = append(delays, res.RequeueAfter)
		after = &v1alpha1.InstanceGroup{}
		if err := c.Get(context.Background(), req.NamespacedName, after); err != nil {
			t.Fatal(err)
		}
		if before != nil && instanceGroupChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}) {
			t.Fatalf("reconcile %d: its own status write would trigger another reconcile", i)
		}
	}
	if statusWrites != 1 {
		t.Errorf("status written %d times for one persistent error, want 1", statusWrites)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32}
	for i := range want {
		if delays[i] != want[i]*time.Second {
			t.Fatalf("retry delays = %v, want %v seconds", delays, want)
		}
	}
	ready := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != "CloudError" || ready.Message != "operation error Auto Scaling: CreateAutoScalingGroup, https response error StatusCode: 400, api error ValidationError: no such launch template" {
		t.Errorf("Ready condition = %+v", ready)
	}
}

func TestInstanceGroupWatchIgnoresStatusOnlyUpdates(t *testing.T) {
	old := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3, ResourceVersion: "1"}}
	cases := map[string]struct {
		edit func(*v1alpha1.InstanceGroup)
		want bool
	}{
		"status only":       {func(ig *v1alpha1.InstanceGroup) { ig.Status.CurrentState = v1alpha1.StateError }, false},
		"spec (generation)": {func(ig *v1alpha1.InstanceGroup) { ig.Generation = 4 }, true},
		"annotation":        {func(ig *v1alpha1.InstanceGroup) { ig.Annotations = map[string]string{"a": "b"} }, true},
		"finalizer":         {func(ig *v1alpha1.InstanceGroup) { ig.Finalizers = []string{Finalizer} }, true},
		"deletion":          {func(ig *v1alpha1.InstanceGroup) { now := metav1.Now(); ig.DeletionTimestamp = &now }, true},
	}
	for name, tc := range cases {
		cur := old.DeepCopy()
		cur.ResourceVersion = "2"
		tc.edit(cur)
		if got := instanceGroupChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
			t.Errorf("%s: reconcile = %v, want %v", name, got, tc.want)
		}
	}
}
