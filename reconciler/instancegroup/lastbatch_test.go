package instancegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// upToDateProvisioner reports two instances on the latest launch template
// version "2", nothing drifted: a rotation whose last batch was replaced.
type upToDateProvisioner struct{ stuckProvisioner }

func (upToDateProvisioner) Apply(_ context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	obs := &providers.Observation{GroupName: ig.Name, LatestTemplateVersion: "2", Min: 2, Max: 3, Desired: 2}
	for _, id := range []string{"last-a", "last-b"} {
		obs.Instances = append(obs.Instances, providers.Instance{ID: id, ProviderID: "aws:///us-west-2a/" + id,
			LifecycleState: "InService", Healthy: true, UpToDate: true})
	}
	return obs, nil
}

// The last batch is judged like the others (review N4): with no drifted
// instance left, a group whose last replacement is not a Ready node yet
// keeps its upgrade slot and says what it waits for; once the node is
// Ready the record is cleared and the slot given back.
func TestTheLastBatchKeepsTheSlotUntilItsReplacementsAreReady(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "last", UID: "uid-last", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS},
		Status: v1alpha1.InstanceGroupStatus{RotationBatch: &v1alpha1.RotationBatch{LaunchTemplateVersion: "2", Since: metav1.NewTime(now),
			Existing: []string{"last-a"}, Owed: 1, Pending: []string{"last-b"}}},
	}
	booting := readyNode("last-b", "aws:///us-west-2a/last-b", nil)
	booting.Status.Conditions[0].Status = corev1.ConditionFalse
	c := crfake.NewClientBuilder().WithScheme(testScheme(t)).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithObjects(ig, readyNode("last-a", "aws:///us-west-2a/last-a", nil), booting).Build()
	recorder := events.NewFakeRecorder(100)
	drainer := &drain.Drainer{Kube: fake.NewClientset(), Client: c, Timeout: time.Hour, Step: time.Second, Now: clock}
	r := slotReconciler(c, clock, upToDateProvisioner{}, 1, drainer, nil, recorder)
	key := client.ObjectKeyFromObject(ig)
	reconcile := func() *v1alpha1.InstanceGroup { return reconcileOnce(t, r, c, key) }

	got := reconcile()
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "waiting for this batch's replacements") {
		t.Errorf("Upgrading %+v, want True waiting for the last batch's replacement", cond)
	}
	if holders := r.Slots.Holders(); len(holders) != 1 {
		t.Errorf("slot holders %v: the last batch keeps its slot", holders)
	}

	if err := c.Get(ctx, client.ObjectKeyFromObject(booting), booting); err != nil {
		t.Fatal(err)
	}
	booting.Status.Conditions[0].Status = corev1.ConditionTrue
	if err := c.Status().Update(ctx, booting); err != nil {
		t.Fatal(err)
	}
	reconcile() // the record is settled and cleared, the rotation done
	got = reconcile()
	if got.Status.RotationBatch != nil {
		t.Errorf("record %+v once the last replacement is Ready", got.Status.RotationBatch)
	}
	if holders := r.Slots.Holders(); len(holders) != 0 {
		t.Errorf("slot holders %v once the rotation is done", holders)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Upgrading %+v once done", cond)
	}
}
