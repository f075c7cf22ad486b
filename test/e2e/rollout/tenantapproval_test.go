package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/reconciler/rollout"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A tenant whose admin allows it (rollout.tenants.approve) approves its
// own group while the admin's approval of the manual canary is pending:
// its group moves to the new AMI at once, judged alone (the record's
// early groups), with an Event on it; the canary's group and the other
// tenant's group do not move. A choice the policy does not allow (defer)
// is refused by the validating webhook. The admin's approval then rolls
// out the rest, which does not take the early group again.
func TestTenantApprovesItsOwnGroupAheadOfAManualWave(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	policy := "maxConcurrentUpgrades: 5\nsoak: 1s\ntenants: {approve: true}\nwaves:\n- {name: canary, namespaces: [e2e-tapprove-a], approval: manual}\n"
	start := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	start["rollout"] = policy
	startFrom(t, suite.Cloud.AMIs[0], start)
	groups := suite.ReadyGroups(t, "e2e-tapprove-a", "e2e-tapprove-b", "e2e-tapprove-c")
	canary, mine, other := groups[0], groups[1], groups[2]
	tenant := tenantClient(t, "tenant-b", mine.Namespace)

	next := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	next["rollout"] = policy
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	g.Eventually(func() string {
		r, err := harness.RolloutRecord(ctx, suite.Admin)
		if err != nil || r.Target != target {
			return "no record of the target yet"
		}
		return r.WaitingFor
	}, harness.ConvergeTimeout, time.Second).Should(ContainSubstring("wave canary waits for the admin's approval"))

	annotate := func(value string) error {
		ig := &v1alpha1.InstanceGroup{}
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(mine), ig); err != nil {
			return err
		}
		patch := client.MergeFrom(ig.DeepCopy())
		metav1.SetMetaDataAnnotation(&ig.ObjectMeta, v1alpha1.AnnotationRollout, value)
		return tenant.Patch(ctx, ig, patch)
	}
	err := annotate(v1alpha1.RolloutDefer)
	g.Expect(err).To(HaveOccurred(), "defer is not allowed by this policy")
	g.Expect(err.Error()).To(ContainSubstring(`metadata.annotations[instancemgr.keikoproj.io/rollout]: Forbidden: "defer" is not allowed by the boundary ConfigMap's rollout.tenants (valid: approve only)`))
	g.Expect(annotate(v1alpha1.RolloutApprove)).To(Succeed())

	mineKey := mine.Namespace + "/" + mine.Name
	g.Eventually(func(g Gomega) {
		r, err := harness.RolloutRecord(ctx, suite.Admin)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Early).To(HaveLen(1))
		g.Expect(r.Early[0].Group).To(Equal(mineKey))
		g.Expect(r.Early[0].State).To(Equal(record.GroupHealthy), "the early group is judged alone, healthy once rotated")
		g.Expect(r.Wave).To(Equal(-1), "the canary still waits for the admin")
		cur := suite.Get(t, mine)
		g.Expect(image(cur)).To(Equal(suite.Cloud.AMIs[1]))
		g.Expect(cur.Status.NodesUpdated).To(Equal(cur.Status.NodesTotal))
	}, 5*time.Minute, time.Second).Should(Succeed())
	g.Expect(image(suite.Get(t, canary))).To(Equal(suite.Cloud.AMIs[0]), "the canary waits for the admin's approval")
	g.Expect(image(suite.Get(t, other))).To(Equal(suite.Cloud.AMIs[0]), "another tenant's group does not move")
	g.Expect(boundariesStatus(suite.Get(t, mine)).Wave).To(Equal(record.TenantEarly))
	events := &corev1.EventList{}
	g.Expect(suite.Admin.List(ctx, events, client.InNamespace(mine.Namespace))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == mine.Name {
			reasons = append(reasons, e.Reason)
		}
	}
	g.Expect(reasons).To(ContainElement(rollout.ReasonGroupMovedEarly), "an Event on the group says it moved early")

	cm := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, record.AnnotationAction, record.ActionApprove)
	g.Expect(suite.Admin.Patch(ctx, cm, patch)).To(Succeed())
	rec := waitRecord(t, target, record.PhaseComplete, 6*time.Minute)
	for _, w := range rec.Waves {
		for _, m := range w.Groups {
			g.Expect(m.Group).NotTo(Equal(mineKey), "wave %s took the early group again", w.Name)
		}
	}
	g.Expect(image(suite.Get(t, canary))).To(Equal(suite.Cloud.AMIs[1]))
	g.Expect(image(suite.Get(t, other))).To(Equal(suite.Cloud.AMIs[1]))
}

// tenantClient returns a client impersonating user, whom a Role and
// RoleBinding allow to manage InstanceGroups in namespace only.
func tenantClient(t *testing.T, user, namespace string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"instancegroups"},
			Verbs: []string{"get", "list", "watch", "update", "patch"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-editor-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := suite.Admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(suite.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer reads Roles from its informers: wait until it
	// lets the tenant read its groups.
	NewWithT(t).Eventually(func() error {
		return c.List(ctx, &v1alpha1.InstanceGroupList{}, client.InNamespace(namespace))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return c
}
