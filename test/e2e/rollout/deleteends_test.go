package rollout

// Deletion always ends (issue 26 item 2): a namespace deleted after a
// boundary change during an admission outage, and groups deleted during a
// halted rollout, all finish deleting within 2 minutes. The original
// project's shapes are test/e2e/lifecycle's (shapes_test.go).

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/harness"
)

// The admin changes the default image and adds a quota, then a tenant's
// namespace of three groups (minSize 0) is deleted while no webhook
// replica answers: the groups and the namespace finish deleting within 2
// minutes (issue 26's report: the groups stayed Deleting and the
// namespace Terminating for good).
func TestNamespaceDeletedAfterABoundaryChangeDuringAnAdmissionOutage(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-delete-outage"
	suite.Namespace(t, ns)
	var groups []*v1alpha1.InstanceGroup
	for _, name := range []string{"a", "b", "c"} {
		ig := harness.ShortGroup(ns, name, 0, 2)
		suite.Create(t, ig)
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		suite.WaitReady(t, ig, 3*time.Minute)
	}

	// A new default image (the fan-out recomputes every group's spec) and
	// a quota for the namespace.
	changed := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	changed["quotas"] = "perNamespace: {maxGroups: 100}\nnamespaces:\n  " + ns + ": {maxGroups: 3, maxSize: 2}\n"
	suite.SetBoundaries(t, changed)
	harness.WebhooksUnreachable(t, suite.Admin)
	g.Eventually(func() error {
		return suite.Admin.Create(ctx, harness.ShortGroup(ns, "while-down", 0, 1), client.DryRunAll)
	}, 30*time.Second, 250*time.Millisecond).Should(MatchError(ContainSubstring("failed calling webhook")), "the outage is real")

	deleted := time.Now()
	g.Expect(suite.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	harness.WaitGone(t, suite.Admin, groups, harness.DeleteWithin)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}, harness.DeleteWithin-time.Since(deleted), time.Second).Should(BeTrue(), "namespace %s is deleted", ns)
	t.Logf("namespace and groups deleted in %s", time.Since(deleted).Round(time.Second))
	for _, ig := range groups {
		suite.NothingInAWS(t, ig.Namespace, ig.Name)
	}
}

// During a halted boundary rollout (the canary's new image never joins),
// the canary, mid-rotation on the failed revision, and a group held on the
// last good revision are deleted: both finish within 2 minutes.
func TestGroupsDeletedDuringAHaltedRolloutFinishDeleting(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	startFrom(t, suite.Cloud.AMIs[0], rolloutBoundaries(suite.Cloud.AMIs[0], "e2e-delhalt-canary", "5s", "45s"))
	canary, others := rolloutGroups(t, "e2e-delhalt")

	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	broken := rolloutBoundaries(suite.Cloud.AMIs[2], "e2e-delhalt-canary", "5s", "45s")
	target := boundaries.Revision(broken)
	suite.SetBoundaries(t, broken)
	waitRecord(t, target, record.PhaseHalted, 5*time.Minute)

	gone := []*v1alpha1.InstanceGroup{canary, others[0]}
	deleted := time.Now()
	for _, ig := range gone {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, suite.Admin, gone, harness.DeleteWithin)
	t.Logf("deleted in %s during the halted rollout", time.Since(deleted).Round(time.Second))
	for _, ig := range gone {
		suite.NothingInAWS(t, ig.Namespace, ig.Name)
	}
}
