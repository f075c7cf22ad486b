package rollout

import (
	"context"
	"fmt"
	"strings"
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

// freezeAround is a rollout key holding every change from yesterday to
// tomorrow (UTC), so that the test does not depend on the hour it runs.
func freezeAround(now time.Time, waves string) string {
	day := func(d int) string { return now.UTC().AddDate(0, 0, d).Format(time.DateOnly) }
	return fmt.Sprintf("maxConcurrentUpgrades: 5\nfreezes: [{from: %q, to: %q}]\n%s", day(-1), day(1), waves)
}

// A change freeze holds every disruption: with waves, the first wave does
// not start (the record says why); without waves, the groups re-admitted
// with a new AMI do not start rotating (Upgrading says why; nothing is
// cordoned). Lifting the freeze (a rollout-only edit: the revision does
// not change) lets the rotation and the rollout go on to the end.
func TestChangeFreezeHoldsRotationsUntilLifted(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	now := time.Now()

	// No waves: every group gets the new AMI at once, and waits to rotate.
	plain := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	suite.SetBoundaries(t, plain)
	harness.WaitRolloutRecord(t, suite.Admin, boundaries.Revision(plain), record.PhaseComplete, harness.ConvergeTimeout)
	groups := suite.ReadyGroups(t, "e2e-freeze-a")
	ig := groups[0]

	frozen := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	frozen["rollout"] = freezeAround(now, "")
	suite.SetBoundaries(t, frozen)
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		if image(cur) != suite.Cloud.AMIs[1] || c == nil {
			return "not re-admitted yet"
		}
		return c.Reason + ": " + c.Message
	}, harness.ConvergeTimeout, time.Second).Should(And(HavePrefix(instancegroup.ReasonWaitingWindow+":"), ContainSubstring("in the change freeze")))
	g.Consistently(func() int {
		n := 0
		for _, node := range suite.GroupNodes(t, ig) {
			if node.Spec.Unschedulable {
				n++
			}
		}
		return n
	}, 10*time.Second, time.Second).Should(BeZero(), "nothing is cordoned during a freeze")

	lifted := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	suite.SetBoundaries(t, lifted)
	g.Eventually(func() error {
		cur := suite.Get(t, ig)
		if cur.Status.CurrentState != v1alpha1.StateReady || cur.Status.ObservedGeneration != cur.Generation || cur.Status.NodesUpdated != cur.Status.NodesTotal {
			return fmt.Errorf("%s, %d of %d updated", cur.Status.CurrentState, cur.Status.NodesUpdated, cur.Status.NodesTotal)
		}
		return nil
	}, 6*time.Minute, time.Second).Should(Succeed(), "the rotation runs once the freeze is lifted")

	// With waves: the first wave waits for the end of the freeze.
	waves := "waves:\n- {name: canary, namespaces: [e2e-freeze-a]}\nsoak: 1s\n"
	start := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	start["rollout"] = "maxConcurrentUpgrades: 5\n" + waves
	suite.SetBoundaries(t, start)
	next := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	next["rollout"] = freezeAround(now, waves)
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	harness.WaitRolloutRecord(t, suite.Admin, target, record.PhaseProgressing, harness.ConvergeTimeout)
	g.Eventually(func() string {
		r, err := harness.RolloutRecord(context.Background(), suite.Admin)
		if err != nil {
			return err.Error()
		}
		return r.WaitingFor
	}, harness.ConvergeTimeout, time.Second).Should(ContainSubstring("in the change freeze"))
	rec := harness.WaitRolloutRecord(t, suite.Admin, target, record.PhaseProgressing, harness.ConvergeTimeout)
	g.Expect(rec.Wave).To(Equal(-1), "no wave starts during a freeze")
	g.Expect(strings.Contains(rec.Message, "the next wave waits")).To(BeTrue(), rec.Message)
	g.Consistently(func() string { return image(suite.Get(t, ig)) }, 5*time.Second, time.Second).Should(Equal(suite.Cloud.AMIs[1]))

	next["rollout"] = "maxConcurrentUpgrades: 5\n" + waves
	suite.SetBoundaries(t, next)
	harness.WaitRolloutRecord(t, suite.Admin, target, record.PhaseComplete, 8*time.Minute)
	g.Expect(image(suite.Get(t, ig))).To(Equal(suite.Cloud.AMIs[0]))
}
