package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Issue 36: a group deleted during a running boundary rollout, mid-
// rotation with its drain under way, finishes deleting in the time its
// drains take, bounded by the admin's drain deadline (data.drains: the
// shortest, 1m, for the canary's namespace). The canary group has one node running an app
// of 4 replicas under minAvailable 3, pinned to the group: the rotation's
// drain evicts one pod, whose replacement has nowhere to run, and the
// budget refuses the rest. The group is deleted then: its drain (taken
// over by the delete) ends at the deadline, nothing is left in AWS, each
// pod of the app left the node once (evicted or, past the deadline,
// deleted: nothing brings one back, it does not tolerate the cordon), no
// pod went with the instance undrained, and the rollout goes on to the
// next wave and completes.
func TestGroupDeletedDuringARunningRolloutEndsWithinTheDrainDeadline(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const canaryNS, replicas, deadline = "e2e-delrun-canary", 4, boundaries.MinDrainDeadline
	// afterDeadline covers what follows the drain: the pods' deletion
	// (capped grace period; kwok's pods end at once), the instance's
	// termination and the cloud resources' deletion.
	const afterDeadline = 20 * time.Second
	withDeadline := func(d map[string]string) map[string]string {
		d["drains"] = "namespaces: {" + canaryNS + ": " + deadline.String() + "}\n"
		return d
	}
	startFrom(t, suite.Cloud.AMIs[0], withDeadline(rolloutBoundaries(suite.Cloud.AMIs[0], canaryNS, "5s", "5m")))
	suite.Namespace(t, canaryNS)
	canary := harness.ShortGroup(canaryNS, "app", 1, 1)
	suite.Create(t, canary)
	other := suite.ReadyGroups(t, "e2e-delrun-b")[0]
	suite.WaitReady(t, canary, 3*time.Minute)
	app := suite.TeamApp(t, canaryNS, replicas, intstr.FromInt32(3))
	labels := map[string]string{"app": "team-app"}
	uids := suite.WatchPodUIDs(canaryNS, labels)
	audit := suite.AuditPods(canaryNS, labels)

	next := withDeadline(rolloutBoundaries(suite.Cloud.AMIs[1], canaryNS, "5s", "5m"))
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	var at time.Time
	g.Eventually(func(g Gomega) {
		cur := suite.Get(t, canary)
		g.Expect(image(cur)).To(Equal(suite.Cloud.AMIs[1]))
		g.Expect(cur.Status.DrainDeadline).NotTo(BeNil())
		g.Expect(cur.Status.DrainDeadline.Nodes).To(HaveLen(1))
		at = cur.Status.DrainDeadline.Nodes[0].At.Time
		g.Expect(suite.AvailableReplicas(app)).To(BeNumerically("<", replicas), "a pod evicted")
	}, 2*time.Minute, harness.PollInterval).Should(Succeed(), "the canary's rotation drains its node")
	rec := waitRecord(t, target, record.PhaseProgressing, harness.ConvergeTimeout)
	g.Expect(rec.Wave).To(Equal(0), "the canary wave runs")

	deleted := time.Now()
	g.Expect(suite.Admin.Delete(ctx, canary)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{canary}, harness.DeleteWithin)
	took := time.Since(deleted)
	suite.NothingInAWS(t, canary.Namespace, canary.Name)
	minReady, samples, orphans := audit.End()
	evicted := uids.End() - replicas
	t.Logf("deleted %s into the canary's rotation drain, %s before its deadline (%s); gone in %s (%s after the deadline); "+
		"%d pod(s) of the app evicted or deleted (bound %d: each of the %d on the node once); audit: %d samples, at least %d Ready, orphans %v",
		deleted.Sub(at.Add(-deadline)).Round(100*time.Millisecond), at.Sub(deleted).Round(100*time.Millisecond), deadline, took.Round(100*time.Millisecond),
		time.Since(at).Round(100*time.Millisecond), evicted, replicas, replicas, samples, minReady, orphans)
	g.Expect(time.Now()).To(BeTemporally("<", at.Add(afterDeadline)), "the deletion outlasted its drain deadline")
	g.Expect(evicted).To(BeNumerically(">", 0))
	g.Expect(evicted).To(BeNumerically("<=", replicas), "the app's pods left the node more often than once each")
	g.Expect(orphans).To(BeEmpty(), "pods bound to a Node whose instance is gone: undrained")

	// The rollout goes on without the canary: the next wave moves the
	// other group and the revision completes.
	waitRecord(t, target, record.PhaseComplete, 3*time.Minute)
	g.Expect(image(suite.WaitReady(t, other, 3*time.Minute))).To(Equal(suite.Cloud.AMIs[1]))
}
