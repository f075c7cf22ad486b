package rollout

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Maintenance that changes while groups rotate (issue 29 item 2):
//   - a namespace's own freeze (rollout.namespaceMaintenance) holds its
//     group while another namespace's group rotates to the end;
//   - when the window closes mid-rotation (here: the admin's freeze is
//     written while the group's first batch drains), the batch in flight
//     finishes and no other starts: nothing stays cordoned and the count
//     of updated instances stops below the total;
//   - when the window opens again the rotation resumes and ends.
func TestWindowClosingMidRotationFinishesTheBatchAndWaits(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	now := time.Now()
	day := func(d int) string { return now.UTC().AddDate(0, 0, d).Format(time.DateOnly) }
	const nsA, nsB = "e2e-window-a", "e2e-window-b"

	plain := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	suite.SetBoundaries(t, plain)
	harness.WaitRolloutRecord(t, suite.Admin, boundaries.Revision(plain), record.PhaseComplete, harness.ConvergeTimeout)
	suite.Namespace(t, nsA)
	suite.Namespace(t, nsB)
	a, b := harness.ShortGroup(nsA, "nodes", 3, 3), harness.ShortGroup(nsB, "nodes", 1, 2)
	suite.Create(t, a)
	suite.Create(t, b)
	suite.WaitReady(t, a, 4*time.Minute)
	suite.WaitReady(t, b, 4*time.Minute)

	upgrading := func(ig *v1alpha1.InstanceGroup) (*v1alpha1.InstanceGroup, string) {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		if image(cur) != suite.Cloud.AMIs[1] || c == nil {
			return cur, "not re-admitted yet"
		}
		return cur, c.Reason + ": " + c.Message
	}
	done := func(ig *v1alpha1.InstanceGroup) func() error {
		return func() error {
			cur := suite.Get(t, ig)
			if image(cur) != suite.Cloud.AMIs[1] || cur.Status.CurrentState != v1alpha1.StateReady || cur.Status.ObservedGeneration != cur.Generation ||
				cur.Status.NodesUpdated != cur.Status.NodesTotal {
				return fmt.Errorf("%s, %d of %d updated", cur.Status.CurrentState, cur.Status.NodesUpdated, cur.Status.NodesTotal)
			}
			return nil
		}
	}

	// nsA frozen on its own: nsB's group rotates, nsA's waits untouched.
	next := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	next["rollout"] = fmt.Sprintf("maxConcurrentUpgrades: 5\nnamespaceMaintenance: {%s: {freezes: [{from: %q, to: %q}]}}\n", nsA, day(-1), day(1))
	suite.SetBoundaries(t, next)
	g.Eventually(func() string { _, s := upgrading(a); return s }, harness.ConvergeTimeout, time.Second).Should(And(
		HavePrefix(instancegroup.ReasonWaitingWindow+":"), ContainSubstring("in namespace "+nsA+"'s change freeze")))
	g.Eventually(done(b), 6*time.Minute, time.Second).Should(Succeed(), "another namespace's group rotates")
	g.Expect(suite.Get(t, a).Status.NodesUpdated).To(BeZero())
	g.Expect(suite.HeldNodes(t, a)).To(BeEmpty(), "nothing of the frozen namespace is cordoned")

	// Lift it; once the first batch drains, the admin's freeze closes every window.
	next["rollout"] = "maxConcurrentUpgrades: 5\n"
	suite.SetBoundaries(t, next)
	g.Eventually(func() []string { return suite.HeldNodes(t, a) }, 3*time.Minute, 200*time.Millisecond).ShouldNot(BeEmpty(), "the rotation starts")
	next["rollout"] = freezeAround(now, "")
	suite.SetBoundaries(t, next)
	g.Eventually(func() string { _, s := upgrading(a); return s }, 4*time.Minute, time.Second).Should(
		ContainSubstring("then the rotation waits: in the change freeze"), "the batch in flight goes on, then waits")
	g.Eventually(func() []string { return suite.HeldNodes(t, a) }, 4*time.Minute, time.Second).Should(BeEmpty(), "the batch in flight finishes")
	stopped := suite.Get(t, a).Status.NodesUpdated
	g.Expect(stopped).To(BeNumerically("<", 3), "the window closed before the rotation ended")
	g.Consistently(func() string {
		cur, s := upgrading(a)
		return fmt.Sprintf("%d updated, held %v, %s", cur.Status.NodesUpdated, suite.HeldNodes(t, a), s)
	}, 20*time.Second, time.Second).Should(HavePrefix(fmt.Sprintf("%d updated, held [], ", stopped)), "no other batch starts while closed")

	// The window opens again: the rotation resumes and ends.
	next["rollout"] = "maxConcurrentUpgrades: 5\n"
	suite.SetBoundaries(t, next)
	g.Eventually(done(a), 8*time.Minute, time.Second).Should(Succeed(), "the rotation resumes when the window opens")
}
