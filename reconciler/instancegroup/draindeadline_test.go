package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// A deleted group whose drain a budget refuses (started an hour ago, past
// the drain timeout): under a drain deadline not yet passed it is never
// DrainBlocked, its Deleting condition names the pod and when the deadline
// deletes it, and status.drainDeadline says when it passes; once the
// deadline has passed, the pod is deleted and the group goes. Without a
// deadline the blocked condition says what the admin can do.
func TestDeleteUnderADrainDeadline(t *testing.T) {
	cases := []struct {
		name     string
		deadline time.Duration
		wantGone bool
		wantMsg  []string
	}{
		{name: "no deadline", wantMsg: []string{"could not be drained", "apps/app", "data.drains", v1alpha1.AnnotationForceDelete}},
		{name: "deadline ahead", deadline: 2 * time.Hour, wantMsg: []string{"node-a: apps/app: eviction refused", "the drain deadline deletes what is left at"}},
		{name: "deadline passed", deadline: 30 * time.Minute, wantGone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, srv, req := blockedDelete(t)
			drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Minute, Step: 20 * time.Millisecond, Now: time.Now,
				Deadline: func(types.NamespacedName) time.Duration { return tc.deadline }}
			drains := &drain.Drains{Drainer: drainer, Max: 5, PerGroup: 1, Interval: time.Millisecond}
			runDrains(t, drains)
			recorder := events.NewFakeRecorder(100)
			prov := &listingProvisioner{}
			r := &Reconciler{
				Client: c, Provisioners: map[string]providers.Provisioner{v1alpha1.ProvisionerEKS: prov},
				Rolling: &upgrade.RollingUpdate{Drainer: drainer, Drains: drains, Recorder: recorder, Client: c},
				Slots:   &fakeslots.Slots{Max: func() int { return 5 }}, Recorder: recorder, PollInterval: time.Second,
				backoff: newFailureBackoff(time.Second, time.Minute),
			}
			cur := &v1alpha1.InstanceGroup{}
			var msg string
			for i := 0; i < 100; i++ {
				if _, err := r.Reconcile(context.Background(), req); err != nil {
					t.Fatal(err)
				}
				if err := c.Get(context.Background(), req.NamespacedName, cur); err != nil {
					break // gone
				}
				cond := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting)
				if cond != nil {
					msg = cond.Message
				}
				if tc.deadline > 0 && cond != nil && cond.Reason == ReasonDrainBlocked {
					t.Fatalf("DrainBlocked under a drain deadline: %s", cond.Message)
				}
				if !tc.wantGone && i > 20 && strings.Contains(msg, "apps/app") {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := prov.deletes == 1; got != tc.wantGone {
				t.Fatalf("cloud resources deleted: %v, want %v (condition %q)", got, tc.wantGone, msg)
			}
			if tc.wantGone {
				return
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(msg, want) {
					t.Errorf("Deleting condition %q does not say %q", msg, want)
				}
			}
			dd := cur.Status.DrainDeadline
			switch {
			case tc.deadline == 0 && dd != nil:
				t.Errorf("status.drainDeadline %+v without a deadline", dd)
			case tc.deadline > 0 && (dd == nil || dd.After.Duration != tc.deadline || len(dd.Nodes) != 1 || dd.Nodes[0].Node != "node-a"):
				t.Errorf("status.drainDeadline %+v, want %s for node-a", dd, tc.deadline)
			case tc.deadline > 0 && time.Until(dd.Nodes[0].At.Time).Round(time.Minute) != time.Hour:
				t.Errorf("node-a's deadline passes at %s, want in an hour (started an hour ago, deadline 2h)", dd.Nodes[0].At)
			}
		})
	}
}
