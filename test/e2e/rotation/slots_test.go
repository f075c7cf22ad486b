package rotation

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/test/harness"
)

// slotHolders lists the holders of the upgrade slot Leases.
func slotHolders(ctx context.Context) ([]string, error) {
	list := &coordinationv1.LeaseList{}
	if err := suite.Admin.List(ctx, list, client.InNamespace(harness.ConfigNamespace), client.MatchingLabels{slots.Label: "true"}); err != nil {
		return nil, err
	}
	var out []string
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			out = append(out, *l.Spec.HolderIdentity)
		}
	}
	return out, nil
}

// A controller restart in the middle of a rotation, with the cluster-wide
// cap at 1: the group that held the slot keeps it (its Lease outlives the
// process) and finishes first, never more than one group rotates, and no
// node is left cordoned.
func TestRestartMidRotationKeepsTheSlotAndTheCap(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 1))
	groups := suite.ReadyGroups(t, "e2e-slot-a", "e2e-slot-b")
	done := func(ig *v1alpha1.InstanceGroup) bool {
		return ig.Spec.EKS.Configuration.Image == suite.Cloud.AMIs[1] && ig.Status.LatestTemplateVersion == "2" &&
			ig.Status.NodesUpdated == ig.Status.NodesTotal && ig.Status.CurrentState == v1alpha1.StateReady
	}
	// observe takes one snapshot of the groups and the slot Leases and
	// checks the cap; it returns the rotating groups, the finished ones
	// and the slot holders.
	maxRotating := 0
	observe := func() (rotating, finished, holders []string, ok bool) {
		// The Leases first: a group takes a slot only after the holder
		// before it stored its finished status, so a holder read here is
		// never ahead of the statuses read next.
		holders, err := slotHolders(ctx)
		if err != nil {
			return nil, nil, nil, false
		}
		current, err := suite.GroupsByKey(ctx)
		if err != nil {
			return nil, nil, nil, false
		}
		for _, ig := range groups {
			key := ig.Namespace + "/" + ig.Name
			cur := current[key]
			if cur == nil {
				return nil, nil, nil, false
			}
			if harness.Condition(cur, v1alpha1.ConditionUpgrading) == metav1.ConditionTrue {
				rotating = append(rotating, key)
			}
			if done(cur) {
				finished = append(finished, key)
			}
		}
		maxRotating = max(maxRotating, len(rotating), len(holders))
		return rotating, finished, holders, true
	}

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 1))
	var holder string
	g.Eventually(func() bool {
		rotating, _, holders, ok := observe()
		if !ok || len(rotating) != 1 || len(holders) != 1 || holders[0] != rotating[0] {
			return false
		}
		holder = holders[0]
		return true
	}, 4*time.Minute, 100*time.Millisecond).Should(BeTrue(), "one group rotates, holding the slot Lease")
	g.Expect(suite.Manager.Stop()).To(Succeed())
	holders, err := slotHolders(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(Equal([]string{holder}), "the slot Lease outlives the controller")

	restarted, err := suite.StartManager()
	g.Expect(err).NotTo(HaveOccurred())
	suite.Manager = restarted
	g.Eventually(func() bool {
		rotating, finished, holders, ok := observe()
		if !ok {
			return false
		}
		if !slices.Contains(finished, holder) {
			// Until the holder is done, no other group may rotate or
			// hold a slot.
			for _, k := range append(rotating, holders...) {
				g.Expect(k).To(Equal(holder), "another group took the slot before %s finished", holder)
			}
		}
		return len(finished) == len(groups)
	}, 8*time.Minute, 200*time.Millisecond).Should(BeTrue(), "both groups roll to the new image")
	g.Expect(maxRotating).To(Equal(1), "rollout.maxConcurrentUpgrades: 1")

	g.Eventually(func() ([]string, error) { return slotHolders(ctx) }, time.Minute, time.Second).Should(BeEmpty(), "every slot given back")
	for _, ig := range groups {
		// The drained old Nodes go a moment after their instances leave
		// the groups (suite.HeldNodes).
		g.Eventually(func() []string { return suite.HeldNodes(t, ig) }, time.Minute, time.Second).Should(BeEmpty(), "no Node of %s stays cordoned or marked for drain", ig.Name)
	}
}

// A group whose rotation makes no progress (its only node's drain is
// blocked by a PodDisruptionBudget) gives its slot back after the stall
// timeout: an UpgradeStalled Event, its node uncordoned, and the group
// waiting behind it (cap 1) rotates.
func TestStalledRotationGivesItsSlotToTheNextGroup(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	// Stall timeout below the drain timeout (15s): the stall, not the
	// drain timeout, uncordons the node.
	opts := suite.ManagerOptions()
	opts.UpgradeStallTimeout = 8 * time.Second
	suite.ReplaceManager(t, opts)

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 1))
	suite.Namespace(t, "e2e-stall-a")
	suite.Namespace(t, "e2e-stall-b")
	stuck, next := harness.ShortGroup("e2e-stall-a", "stuck", 1, 1), harness.ShortGroup("e2e-stall-b", "next", 1, 2)
	suite.Create(t, stuck)
	suite.Create(t, next)
	stuckReady, nextReady := suite.WaitReady(t, stuck, 3*time.Minute), suite.WaitReady(t, next, 3*time.Minute)
	d := workload(t, stuck, 1)
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), pdb)).To(Succeed())
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	g.Expect(suite.Admin.Update(ctx, pdb)).To(Succeed())
	t.Cleanup(func() { // let the group's nodes drain when it is deleted
		if err := suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), pdb); err == nil {
			pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			_ = suite.Admin.Update(ctx, pdb)
		}
	})

	patch := client.MergeFrom(stuckReady.DeepCopy())
	stuckReady.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, stuckReady, patch)).To(Succeed())
	g.Eventually(func() ([]string, error) { return slotHolders(ctx) }, harness.ConvergeTimeout, 100*time.Millisecond).
		Should(Equal([]string{"e2e-stall-a/stuck"}))
	patch = client.MergeFrom(nextReady.DeepCopy())
	nextReady.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(suite.Admin.Patch(ctx, nextReady, patch)).To(Succeed())

	event, err := harness.WaitForEvent(ctx, suite.Admin, "e2e-stall-a", "stuck", instancegroup.ReasonUpgradeStalled, "upgrade slot released", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(event.Note).To(ContainSubstring("0 updated, 1 drifted"))
	g.Expect(event.Note).To(ContainSubstring("uncordoned"))
	for _, n := range suite.GroupNodes(t, stuck) {
		g.Expect(n.Spec.Unschedulable).To(BeFalse(), "node %s left cordoned after the stall", n.Name)
	}
	// The next group rotates to the end while the stalled one waits.
	g.Eventually(func() string { return describe(suite.Get(t, next)) }, 3*time.Minute, time.Second).Should(Equal("Ready v2 1/1 surge 0"))
	cur := &appsv1.Deployment{}
	g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
	g.Expect(cur.Status.AvailableReplicas).To(BeEquivalentTo(1), "the protected pod was not evicted")
}
