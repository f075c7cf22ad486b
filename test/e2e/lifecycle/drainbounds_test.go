package lifecycle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Issue 36 item 5: a PodDisruptionBudget that never allows a disruption
// holds a group's deletion exactly until the admin's drain deadline (the
// boundary ConfigMap's data.drains, 1m for this namespace), shown in
// status.drainDeadline; then the pod is deleted, a Warning names it, and
// the group goes, its pod gone before its instance (the drain audit
// counts no loss).
func TestDeleteHeldByABudgetEndsAtTheDrainDeadline(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-delete-deadline"
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["drains"] = "namespaces: {" + ns + ": 1m}\n"
	suite.SetBoundaries(t, data)
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "pinned", 1, 1)
	suite.Create(t, ig)
	suite.WaitReady(t, ig, 3*time.Minute)
	suite.TeamApp(t, ns, 1, intstr.FromInt32(1)) // never allows an eviction
	before := harness.Counter(t, "instance_manager_drain_deadline_pods_deleted_total", map[string]string{"reason": "eviction_refused"})

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	var at time.Time
	g.Eventually(func(g Gomega) {
		cur := suite.Get(t, ig)
		g.Expect(cur.Status.DrainDeadline).NotTo(BeNil())
		g.Expect(cur.Status.DrainDeadline.After.Duration).To(Equal(time.Minute))
		g.Expect(cur.Status.DrainDeadline.Nodes).To(HaveLen(1))
		at = cur.Status.DrainDeadline.Nodes[0].At.Time
	}, 2*time.Minute, harness.PollInterval).Should(Succeed(), "status.drainDeadline while the drain runs")
	t.Logf("deleted at %s; the drain's deadline passes at %s", time.Now().UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))

	// Held until the deadline: still stored (and never Blocked: the
	// deadline bounds it, whatever --drain-timeout says) up to 2 s before it.
	if hold := time.Until(at) - 2*time.Second; hold > 0 {
		g.Consistently(func() error {
			return suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{})
		}, hold, time.Second).Should(Succeed(), "the group went before its drain deadline")
	}
	event, err := harness.WaitForEvent(ctx, suite.Admin, ns, ig.Name, drain.ReasonDrainDeadline, ns+"/team-app-", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	eventAt := event.EventTime.Time
	if eventAt.IsZero() {
		eventAt = event.CreationTimestamp.Time
	}
	g.Expect(eventAt).To(BeTemporally(">=", at.Add(-time.Second)), "a pod deleted before the deadline")
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 3*time.Minute)
	gone := time.Now()
	t.Logf("pod deleted %s after the deadline (%s); group gone %s after it; Event: %s",
		eventAt.Sub(at).Round(100*time.Millisecond), event.Reason, gone.Sub(at).Round(100*time.Millisecond), event.Note)
	g.Expect(harness.Counter(t, "instance_manager_drain_deadline_pods_deleted_total", map[string]string{"reason": "eviction_refused"})).To(Equal(before + 1))
}

// Issue 36 item 6: an app pinned to its group whose pods tolerate every
// taint comes back to the cordoned nodes after each eviction; without a
// deadline the deletion still finishes, each workload's returns evicted
// at most drain.MaxArrivalEvictions times per node, and the pods left go
// with the nodes under a Warning naming them.
func TestDeleteOfAnAppToleratingEveryTaintFinishes(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns, nodes, replicas = "e2e-delete-tolerates-all", 2, 2
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, ns)
	ig := harness.ShortGroup(ns, "pinned", nodes, nodes)
	suite.Create(t, ig)
	suite.WaitReady(t, ig, 3*time.Minute)
	suite.TeamApp(t, ns, replicas, intstr.FromInt32(1), tolerateEverything)

	// Every pod of the app seen, by UID: replicas + one per eviction.
	seen := suite.WatchPodUIDs(ns, map[string]string{"app": "team-app"})
	// The pods left on the nodes go with their instances, as documented.
	suite.ExpectUndrained(t, ig)
	start := time.Now()
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	event, err := harness.WaitForEvent(ctx, suite.Admin, ns, ig.Name, drain.ReasonDrainPodsLeft, ns+"/team-app-", 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 5*time.Minute)
	took := time.Since(start)
	evictions := seen.End() - replicas
	bound := nodes * (1 + drain.MaxArrivalEvictions) * replicas
	t.Logf("deleted in %s; %d pods of the app evicted or deleted in all (bound %d: %d node(s) x (first + %d returns) x %d replicas); Event: %s",
		took.Round(100*time.Millisecond), evictions, bound, nodes, drain.MaxArrivalEvictions, replicas, event.Note)
	g.Expect(evictions).To(BeNumerically(">", 0))
	g.Expect(evictions).To(BeNumerically("<=", bound), "the app's pods were evicted more often than the bound")
	g.Expect(apierrors.IsNotFound(suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{}))).To(BeTrue())
}
