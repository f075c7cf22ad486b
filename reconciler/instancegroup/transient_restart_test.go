package instancegroup

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// A transient failure that persists reaches Error, and its retries keep
// backing off, even when the controller restarts (a new process, a new
// leader) before every reconcile: the run is read back from
// status.reconcileFailures (written up to TransientAttempts attempts, not
// on every retry). A success clears it.
func TestTransientFailureRunSurvivesRestarts(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 2, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
		Status:     v1alpha1.InstanceGroupStatus{CurrentState: v1alpha1.StateReady, ObservedGeneration: 1},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	clock := time.Unix(10000, 0)
	prov := &flakyProvisioner{err: throttled, failures: 4}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
	get := func() *v1alpha1.InstanceGroup {
		got := &v1alpha1.InstanceGroup{}
		if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i, want := range []struct {
		state    string
		attempts int
		delay    time.Duration
	}{
		{v1alpha1.StateReady, 1, time.Second},
		{v1alpha1.StateReady, 2, 2 * time.Second},
		{v1alpha1.StateError, 3, 4 * time.Second}, // 3 attempts over 8 minutes: persistent
		{v1alpha1.StateError, 3, 8 * time.Second}, // stored up to TransientAttempts only; the backoff goes on from it
		{v1alpha1.StateReady, 0, 0},               // recovered: the run is over
	} {
		r := &Reconciler{ // a new controller each time
			Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: prov},
			Recorder: events.NewFakeRecorder(100), PollInterval: time.Second, ResyncInterval: time.Minute,
			backoff: newFailureBackoff(time.Second, 5*time.Minute), Slots: &fakeslots.Slots{Max: func() int { return 5 }},
			TransientAttempts: 3, TransientGrace: 5 * time.Minute, Now: func() time.Time { return clock },
		}
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		got := get()
		run := got.Status.ReconcileFailures
		switch {
		case got.Status.CurrentState != want.state:
			t.Fatalf("after reconcile %d: state %s, want %s", i, got.Status.CurrentState, want.state)
		case want.attempts == 0 && run != nil:
			t.Fatalf("after reconcile %d: run %+v, want none after a success", i, run)
		case want.attempts > 0 && (run == nil || run.Attempts != want.attempts || run.Generation != 2 || !run.Since.Time.Equal(time.Unix(10000, 0))):
			t.Fatalf("after reconcile %d: run %+v, want %d attempts of generation 2 since the first failure", i, run, want.attempts)
		case want.attempts > 0 && res.RequeueAfter != want.delay:
			t.Fatalf("after reconcile %d: retried after %s, want %s", i, res.RequeueAfter, want.delay)
		}
		clock = clock.Add(4 * time.Minute)
	}
}

// A run stored in a status that the cache has not yet seen cleared is
// not taken up again by the process that saw the success; a spec change
// (another generation) starts a new run.
func TestFailureBackoffTakesUpAStoredRunOnlyAfterARestart(t *testing.T) {
	key := types.NamespacedName{Namespace: "team-a", Name: "web"}
	since := time.Unix(5000, 0)
	stored := &v1alpha1.ReconcileFailures{Generation: 3, Attempts: 6, Since: metav1.NewTime(since)}
	now := time.Unix(9000, 0)
	for _, tc := range []struct {
		name      string
		setup     func(b *failureBackoff)
		stored    *v1alpha1.ReconcileFailures
		attempts  int
		wantSince time.Time
	}{
		{"restarted: taken up", func(*failureBackoff) {}, stored, 7, since},
		{"no stored run", func(*failureBackoff) {}, nil, 1, now},
		{"stored run of an older generation", func(*failureBackoff) {}, &v1alpha1.ReconcileFailures{Generation: 2, Attempts: 6, Since: metav1.NewTime(since)}, 1, now},
		{"succeeded here since: a stale cache", func(b *failureBackoff) { b.succeeded(key, 3) }, stored, 1, now},
		{"counted more here than stored", func(b *failureBackoff) {
			for range 8 {
				b.record(key, 3, since, nil)
			}
		}, stored, 9, since},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFailureBackoff(time.Second, 5*time.Minute)
			tc.setup(b)
			_, attempts, got := b.record(key, 3, now, tc.stored)
			if attempts != tc.attempts || !got.Equal(tc.wantSince) {
				t.Fatalf("record = %d attempts since %s, want %d since %s", attempts, got, tc.attempts, tc.wantSince)
			}
		})
	}
}

// recordingProvisioner observes an active managed group carrying rec.
type recordingProvisioner struct{ rec *v1alpha1.CreateFailure }

func (p *recordingProvisioner) Apply(context.Context, *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	return &providers.Observation{GroupName: "web", Managed: true, Min: 1, Max: 2, CreateFailure: p.rec}, nil
}

func (p *recordingProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}

// The provisioner's CREATE_FAILED record is what the status keeps
// (status.createFailure), and nil clears it.
func TestCreateFailureRecordIsStoredInTheStatus(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	prov := &recordingProvisioner{rec: &v1alpha1.CreateFailure{Name: "ng", CreatedAt: metav1.NewTime(time.Unix(100, 0)), Since: metav1.NewTime(time.Unix(200, 0)), Attempts: 2}}
	r := &Reconciler{
		Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: prov},
		Recorder: events.NewFakeRecorder(100), PollInterval: time.Second, ResyncInterval: time.Minute,
		backoff: newFailureBackoff(time.Second, time.Minute), Slots: &fakeslots.Slots{Max: func() int { return 5 }},
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
	for _, want := range []*v1alpha1.CreateFailure{prov.rec, nil} {
		prov.rec = want
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.InstanceGroup{}
		if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		if (want == nil) != (got.Status.CreateFailure == nil) || want != nil && got.Status.CreateFailure.Attempts != want.Attempts {
			t.Fatalf("status.createFailure %+v, want %+v", got.Status.CreateFailure, want)
		}
	}
}
