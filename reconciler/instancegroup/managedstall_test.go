package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// retiringProvisioner is an eks-managed replacement of node group "old"
// by "new": with a slot it drains old's Nodes (Disruptions.DrainNodes),
// without one it waits with old serving, as eksmanaged does.
type retiringProvisioner struct{}

func (retiringProvisioner) Apply(ctx context.Context, _ *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	ok, err := providers.Admitted(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &providers.Observation{GroupName: "old", Managed: true, Active: true, WaitingForSlot: true,
			Message: "replacing EKS node group old with new: waiting for an upgrade slot"}, nil
	}
	res, err := providers.DisruptionsFrom(ctx).DrainNodes(ctx, "eks.amazonaws.com/nodegroup", "old")
	if err != nil || res.Done {
		return &providers.Observation{GroupName: "new", Managed: true, Active: true}, err
	}
	return &providers.Observation{GroupName: "new", Managed: true, Active: true, Updating: true, Retiring: []string{"old"},
		Progress: "replacing old with new: draining", Blocked: res.Blocked, Message: res.Message}, nil
}

func (retiringProvisioner) Delete(context.Context, *v1alpha1.InstanceGroup) (bool, error) {
	return true, nil
}

// An eks-managed replacement whose retirement drain makes no progress
// releases its upgrade slot after the stall timeout, as an eks rotation
// does (review N2): Warning UpgradeStalled, condition UpgradeStalled, the
// metric, the old node group's cordoned node uncordoned (it keeps
// serving), no slot asked for one stall timeout, then asked again. A
// drain whose pod is inside its termination grace period is progress
// until that period ends (review N14). A budget's refusal is one
// DrainBlocked Event, not one per pass.
func TestManagedReplacementStalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome fakeeviction.Outcome
		grace   int64
		// passes: minutes after the previous pass, and whether the
		// group holds its slot after it.
		passes     []struct{ after, held int }
		wantStall  int // the pass that stalls
		wantBlocks int // DrainBlocked Events in all
	}{
		{name: "a budget refuses every eviction", outcome: fakeeviction.Refuse,
			passes:    []struct{ after, held int }{{0, 1}, {11, 1}, {1, 1}, {1, 1}, {18, 0}, {10, 0}, {31, 1}},
			wantStall: 4, wantBlocks: 1},
		{name: "a pod inside its one-hour grace period", outcome: fakeeviction.Terminate, grace: 3600,
			passes:    []struct{ after, held int }{{0, 1}, {31, 1}, {25, 1}, {5, 0}},
			wantStall: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			ig := &v1alpha1.InstanceGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-web", Generation: 1, Finalizers: []string{Finalizer}},
				Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged},
			}
			c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithStatusSubresource(&v1alpha1.InstanceGroup{}).WithObjects(ig,
				readyNode("old-0", "", map[string]string{"eks.amazonaws.com/nodegroup": "old"}),
				readyNode("new-0", "", map[string]string{"eks.amazonaws.com/nodegroup": "new"})).Build()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "broker-0"},
				Spec: corev1.PodSpec{NodeName: "old-0", TerminationGracePeriodSeconds: &tc.grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			srv := fakeeviction.New(clock, func(*corev1.Pod) fakeeviction.Outcome { return tc.outcome }, pod)
			recorder := events.NewFakeRecorder(100)
			drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: 10 * time.Minute, Step: 20 * time.Millisecond, Now: clock}
			slots := &slots.Leases{Client: c, Reader: c, Namespace: "instance-manager", Max: func() int { return 1 }, Now: clock}
			r := &Reconciler{
				Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: retiringProvisioner{}},
				Rolling: &upgrade.RollingUpdate{Drainer: drainer, Recorder: recorder, Client: c},
				Slots:   slots, StallTimeout: 30 * time.Minute, Now: clock,
				Recorder: recorder, PollInterval: time.Second, ResyncInterval: time.Minute, backoff: newFailureBackoff(time.Second, time.Minute),
			}
			key := client.ObjectKeyFromObject(ig)
			stallsBefore := counter(t)
			blocks := 0
			for i, p := range tc.passes {
				now = now.Add(time.Duration(p.after) * time.Minute)
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
					t.Fatalf("pass %d: %v", i, err)
				}
				got := &v1alpha1.InstanceGroup{}
				if err := c.Get(ctx, key, got); err != nil {
					t.Fatal(err)
				}
				cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading)
				if held := len(slots.Holders()); held != p.held {
					t.Fatalf("pass %d (+%dm): holds %d slot(s), want %d; Upgrading %+v", i, p.after, held, p.held, cond)
				}
				stalled, uncordoned := false, false
				for len(recorder.Events) > 0 {
					e := <-recorder.Events
					switch {
					case strings.HasPrefix(e, "Warning "+ReasonDrainBlocked):
						blocks++
					case strings.HasPrefix(e, "Warning "+ReasonUpgradeStalled):
						stalled = true
						uncordoned = strings.Contains(e, "old keep(s) serving; uncordoned old-0")
					}
				}
				if stalled != (i == tc.wantStall) {
					t.Fatalf("pass %d (+%dm): UpgradeStalled Event %v, want it at pass %d; Upgrading %+v", i, p.after, stalled, tc.wantStall, cond)
				}
				if i < tc.wantStall {
					continue
				}
				if i == tc.wantStall {
					node := &corev1.Node{}
					if err := c.Get(ctx, client.ObjectKey{Name: "old-0"}, node); err != nil {
						t.Fatal(err)
					}
					if !uncordoned || node.Spec.Unschedulable || node.Annotations[drain.AnnotationDrainStarted] != "" {
						t.Errorf("stall: the Event does not name old-0 uncordoned (%v), or it is still cordoned (%v, %v)", uncordoned, node.Spec.Unschedulable, node.Annotations)
					}
				}
				if p.held == 0 && (cond == nil || cond.Reason != ReasonUpgradeStalled) {
					t.Errorf("pass %d after the stall: Upgrading %+v, want reason %s", i, cond, ReasonUpgradeStalled)
				}
			}
			if got := counter(t) - stallsBefore; got != 1 {
				t.Errorf("instance_manager_upgrade_stalls_total rose by %v, want 1", got)
			}
			if blocks != tc.wantBlocks {
				t.Errorf("%d DrainBlocked Event(s), want %d", blocks, tc.wantBlocks)
			}
		})
	}
}

func TestBlockCause(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"node n1 could not be drained within 10m0s: apps/web-1: eviction refused: Cannot evict pod",
			"node n1 could not be drained within 10m0s: apps/web-1: eviction refused: Cannot evict pod as it would violate", true},
		{"node n1 could not be drained within 10m0s: apps/web-1: eviction refused: x; apps/web-2: eviction refused: x",
			"node n2 could not be drained within 10m0s: apps/web-2: eviction refused: x; node n1 could not be drained within 10m0s: apps/web-1: eviction refused: x", true},
		{"node n1 could not be drained within 10m0s: apps/web-1: eviction refused: x",
			"node n1 could not be drained within 10m0s: apps/web-2: eviction refused: x", false},
	} {
		b := drainBlocks{}
		key := types.NamespacedName{Namespace: "team", Name: "web"}
		if !b.announce(key, tc.a) {
			t.Fatalf("first blockage %q not announced", tc.a)
		}
		if again := b.announce(key, tc.b); again == tc.same {
			t.Errorf("%q after %q announced %v, want %v", tc.b, tc.a, again, !tc.same)
		}
		b.forget(key)
		if !b.announce(key, tc.a) {
			t.Errorf("after forget: %q not announced", tc.a)
		}
	}
}

func TestFargatePace(t *testing.T) {
	two := ptrIntStr(intstr.FromInt32(2))
	for _, tc := range []struct {
		name string
		max  *intstr.IntOrString
		pods int
		want int
	}{
		{"default 25% of 200 pods", nil, 200, 50},
		{"default: at least 1", nil, 3, 1},
		{"the spec's maxUnavailable", two, 200, 2},
	} {
		ig := &v1alpha1.InstanceGroup{}
		if tc.max != nil {
			ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: tc.max}
		}
		if got := fargatePace(ig, tc.pods); got != tc.want {
			t.Errorf("%s: fargatePace = %d, want %d", tc.name, got, tc.want)
		}
	}
}
