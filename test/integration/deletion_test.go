package integration

// Deletion always ends (issue 26 item 2): whatever the boundaries or the
// webhooks do meanwhile, a deleted group's finalizer goes, through the
// real API server, its webhook configurations and the manager.

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// zeroMinGroups creates names in the tenant's namespace as a
// cluster-autoscaler layout writes them (minSize 0, maxSize 3) and waits
// until the controller has put its finalizer on each: their deletion goes
// through the controller.
func zeroMinGroups(t *testing.T, tn *tenant, names ...string) []*v1alpha1.InstanceGroup {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var out []*v1alpha1.InstanceGroup
	for _, name := range names {
		ig := shortIG(tn.namespace, name)
		ig.Spec.EKS.MinSize = 0
		g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
		out = append(out, ig)
	}
	for _, ig := range out {
		g.Eventually(func() []string {
			cur := &v1alpha1.InstanceGroup{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
				return nil
			}
			return cur.Finalizers
		}, time.Minute, 200*time.Millisecond).Should(ContainElement(instancegroup.Finalizer), "the controller's finalizer on %s/%s", ig.Namespace, ig.Name)
	}
	return out
}

// tighterBoundaries is the example ConfigMap with another default image
// (every group's effective spec changes: the fan-out re-admits each) and
// a quota for namespace ns that zeroMinGroups' groups (maxSize 3) exceed:
// their re-admission is refused and the admission gate holds them.
func tighterBoundaries(t *testing.T, ns string) map[string]string {
	t.Helper()
	data := exampleConfigMapData(t)
	d := strings.Replace(data["defaults"], "image: ami-1234", "image: ami-5678", 1)
	if d == data["defaults"] {
		t.Fatalf("the example ConfigMap's defaults set no image ami-1234:\n%s", data["defaults"])
	}
	data["defaults"] = d
	data["quotas"] = strings.TrimRight(data["quotas"], "\n") + "\nnamespaces:\n  " + ns + ": {maxSize: 2}\n"
	return data
}

// The admin changes the boundaries (a new default image, a quota the
// groups now exceed) and a tenant deletes its groups at once, while the
// fan-out re-admits them (refused: the admission gate holds them): they
// still finish deleting (the user report of issue 26: "Deleting"
// for good, each update refused as a spec change of a deleting group).
func TestGroupsDeletedRightAfterABoundaryChangeFinishDeleting(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-del-cm")
	g, ctx, tn := underBoundaries(t, exampleConfigMapData(t), "del-cm-tenant", ns)
	groups := zeroMinGroups(t, tn, "a", "b", "c")

	g.Expect(setConfigMap(ctx, tighterBoundaries(t, ns))).To(Succeed())
	for _, ig := range groups {
		g.Expect(tn.client.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, admin, groups, harness.DeleteWithin)
}

// A group the admission gate holds (stored under boundaries that no
// longer admit it, its re-admission refused) finishes deleting.
func TestAGroupHeldByTheAdmissionGateFinishesDeleting(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-del-held")
	g, ctx, tn := underBoundaries(t, exampleConfigMapData(t), "del-held-tenant", ns)
	groups := zeroMinGroups(t, tn, "held")

	mustSetConfigMap(t, tighterBoundaries(t, ns))
	g.Eventually(func() string {
		cur := &v1alpha1.InstanceGroup{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(groups[0]), cur); err != nil {
			return err.Error()
		}
		if c := findCondition(cur, v1alpha1.ConditionBoundariesApplied); c != nil {
			return c.Reason
		}
		return ""
	}, time.Minute, 250*time.Millisecond).Should(Equal("Rejected"), "the re-admission under the tighter quota is refused")
	g.Expect(tn.client.Delete(ctx, groups[0])).To(Succeed())
	harness.WaitGone(t, admin, groups, harness.DeleteWithin)
}

// No webhook replica answers (the API server cannot reach the webhook
// service) while a tenant deletes three groups: they finish deleting,
// since the finalizer's release does not go to the webhooks (their match
// condition); a tenant's write that does is refused as before.
func TestGroupsDeletedDuringAnAdmissionOutageFinishDeleting(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-del-outage")
	g, ctx, tn := underBoundaries(t, nil, "del-outage-tenant", ns)
	groups := zeroMinGroups(t, tn, "a", "b", "c")

	harness.WebhooksUnreachable(t, admin)
	// The API server reads webhook configurations through a watch: wait
	// until a (dry-run) create fails for want of the webhook.
	g.Eventually(func() error {
		return tn.client.Create(ctx, shortIG(ns, "while-down"), client.DryRunAll)
	}, 30*time.Second, 250*time.Millisecond).Should(MatchError(ContainSubstring(`failed calling webhook "instancegroups.mutate.instancemgr.keikoproj.io"`)), "the outage is real")
	for _, ig := range groups {
		g.Expect(tn.client.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, admin, groups, harness.DeleteWithin)
}
