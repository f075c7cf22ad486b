package instancegroup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// flakyProvisioner fails its first failures Applies with err, then
// observes an active managed group.
type flakyProvisioner struct {
	err      error
	failures int
	calls    int
}

func (p *flakyProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	p.calls++
	if p.calls <= p.failures {
		return nil, p.err
	}
	return &providers.Observation{GroupName: "web", Managed: true, Active: true, Min: 1, Max: 2}, nil
}

func (p *flakyProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}

// throttled is an Auto Scaling throttling error as the SDK returns it once
// its own retries are spent.
var throttled = fmt.Errorf("operation error Auto Scaling: DescribeAutoScalingGroups, exceeded maximum number of attempts, 8, https response error StatusCode: 400, RequestID: r-1, api error Throttling: Rate exceeded: %w",
	&smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"})

// A transient failure (throttling that outlived the SDK's retries) keeps
// the group's last state and sets Degraded; it becomes Error only once it
// has lasted both TransientAttempts attempts and TransientGrace; a
// terminal failure is Error at once; a success clears Degraded.
func TestTransientFailureIsDegradedUntilItPersists(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		failures int
		step     time.Duration // clock advance per reconcile
		want     []string      // state after each reconcile ("" Degraded keeps Ready)
	}{
		{name: "throttling, recovered", err: throttled, failures: 2, step: time.Second,
			want: []string{"Ready+Degraded", "Ready+Degraded", "Ready+Recovered"}},
		{name: "throttling for 4 attempts but under the grace", err: throttled, failures: 6, step: time.Second,
			want: []string{"Ready+Degraded", "Ready+Degraded", "Ready+Degraded", "Ready+Degraded", "Ready+Degraded"}},
		{name: "throttling past attempts and grace", err: throttled, failures: 6, step: 4 * time.Minute,
			want: []string{"Ready+Degraded", "Ready+Degraded", "Ready+Degraded", "Error", "Error", "Error", "Ready+Recovered"}},
		{name: "terminal error", err: &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized"}, failures: 1, step: time.Second,
			want: []string{"Error", "Ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 2, Finalizers: []string{Finalizer}},
				Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
				Status:     v1alpha1.InstanceGroupStatus{CurrentState: v1alpha1.StateReady, ObservedGeneration: 1},
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
			clock := time.Unix(10000, 0)
			r := &Reconciler{
				Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: &flakyProvisioner{err: tc.err, failures: tc.failures}},
				Recorder: events.NewFakeRecorder(100), PollInterval: time.Second, ResyncInterval: time.Minute,
				backoff: newFailureBackoff(time.Second, 5*time.Minute), Slots: &fakeslots.Slots{Max: func() int { return 5 }},
				TransientAttempts: 3, TransientGrace: 10 * time.Minute, Now: func() time.Time { return clock },
			}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
			for i, want := range tc.want {
				if _, err := r.Reconcile(context.Background(), req); err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				clock = clock.Add(tc.step)
				got := &v1alpha1.InstanceGroup{}
				if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
					t.Fatal(err)
				}
				state := got.Status.CurrentState
				if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d != nil && state != v1alpha1.StateError {
					state += map[metav1.ConditionStatus]string{metav1.ConditionTrue: "+Degraded", metav1.ConditionFalse: "+" + d.Reason}[d.Status]
				}
				if state != want {
					t.Fatalf("after reconcile %d: %s, want %s (conditions %+v)", i, state, want, got.Status.Conditions)
				}
				if want == "Ready+Degraded" {
					if got.Status.ObservedGeneration != 1 {
						t.Errorf("a Degraded group's observedGeneration moved to %d: the rollout would judge it", got.Status.ObservedGeneration)
					}
					if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d.Reason != "CloudError" || !strings.Contains(d.Message, "Throttling: Rate exceeded") {
						t.Errorf("Degraded = %+v, want the cause", d)
					}
				}
			}
		})
	}
}
