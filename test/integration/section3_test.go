package integration

// Admin-side edits of the 2026-11-26 security review's section 3 that were
// "accepted silently": each is now refused, warned, or harmless, tested as
// the admin (system:masters) through the real API server. docs/security.md,
// "Security", table "Attacks and their tests", maps every row.

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/harness"
)

// awaitObserved waits until the controller has written a condition on the
// group: the manager's cache, which the ConfigMap webhook reads, holds it.
func awaitObserved(t *testing.T, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	NewWithT(t).Eventually(func() int {
		return len(getIG(t, ig.Namespace, ig.Name).Status.Conditions)
	}, harness.ConvergeTimeout, 200*time.Millisecond).ShouldNot(BeZero())
}

// Section 3 (excluded namespace): adding a tenant namespace to
// excludedNamespaces in warn mode makes its groups' kept submissions
// effective, values dropped months ago included. As admin: admitted with a
// warning naming the group and the sensitive path.
func TestSection3ExcludingANamespaceWarnsOfReadmittedValues(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-exclude")
	g, ctx, tn := underBoundaries(t, nil, "exclude-tenant", ns)
	deleteGroupsAtEnd(t, ns)
	ig := fullIG(ns, "open-imds")
	ig.Spec.EKS.Configuration.MetadataOptions = &v1alpha1.MetadataOptions{HttpTokens: "optional"}
	// The example's cluster: the group's identity is recorded before it is
	// built, and excluding the namespace must not move it to another
	// cluster (that is refused, TestAttack14ProvisionerSwitchWithResourcesIsRefused).
	ig.Spec.EKS.Configuration.ClusterName = lpHomeCluster
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed(), "warn mode admits it, without the IMDS setting")
	awaitObserved(t, ig)

	asAdmin, warnings := adminWithWarnings(t)
	data := exampleConfigMapData(t)
	data["excludedNamespaces"] = "[" + ns + "]"
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	warnings.take()
	g.Expect(harness.WriteBoundaries(ctx, asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).To(And(
		ContainSubstring("take values their tenants submitted on sensitive paths"),
		ContainSubstring(ns+"/open-imds ("), ContainSubstring("spec.eks.configuration.metadataOptions")))
}

// Section 3 (crdStrategy kinds): allowing a kind whose controller acts with
// its own rights. A kind the project knows (RollingUpgrade) cannot have
// its executed fields shared (TestAdminCannotShareRollingUpgradeScripts)
// nor its asgName aimed elsewhere (TestTenantCRDTemplateIsConfined); a
// kind it does not know (batch Job: a pod template) is admitted with a
// warning that says what the admin hands tenants.
func TestSection3UnreviewedCRDKindIsWarned(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	asAdmin, warnings := adminWithWarnings(t)
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	data := exampleConfigMapData(t)
	data["crdStrategy"] = "allowedKinds: [{group: batch, kind: Job, tenantFields: [spec.template]}]"
	warnings.take()
	g.Expect(harness.WriteBoundaries(context.Background(), asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).To(ContainSubstring("data.crdStrategy.allowedKinds[0]: instance-manager has not reviewed kind Job.batch"))
}

// Section 3 (namespaces quota entry): a quotas.namespaces entry replaces
// perNamespace whole, so the bounds it leaves out are none for that
// namespace (the example in docs/boundaries.md, "Quotas", kept only maxGroups). As admin:
// admitted with a warning naming the entry and the bounds it drops.
func TestSection3NamespaceQuotaEntryDroppingBoundsIsWarned(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	asAdmin, warnings := adminWithWarnings(t)
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	data := exampleConfigMapData(t)
	data["quotas"] = "perNamespace: {maxGroups: 10, maxSize: 50, maxTotalVCPU: 512}\nnamespaces:\n  team-a: {maxGroups: 10}\n  team-b: {maxGroups: 10, maxSize: 50, maxTotalVCPU: 512}\n"
	warnings.take()
	g.Expect(harness.WriteBoundaries(context.Background(), asAdmin, data)).To(Succeed())
	got := strings.Join(warnings.take(), "\n")
	g.Expect(got).To(ContainSubstring("quotas.namespaces.team-a replaces quotas.perNamespace for namespace team-a, which then has no maxSize, maxTotalVCPU; write them in quotas.namespaces.team-a"))
	g.Expect(got).NotTo(ContainSubstring("quotas.namespaces.team-b"))
}

// Section 3 (conditionals): a conditional selecting on annotations
// tenants write grants its defaults to any tenant who writes them (attack
// 26 is the allowlist half, TestAttack26ConditionalValuesAreOnlyForMatchedGroups).
// As admin: admitted with a warning naming the selector; a conditional on
// a behaviour annotation the ConfigMap does not share gets none.
func TestSection3ConditionalOnTenantAnnotationsIsWarned(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	asAdmin, warnings := adminWithWarnings(t)
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	data := exampleConfigMapData(t)
	data["conditionals"] = gpuConditional
	warnings.take()
	g.Expect(harness.WriteBoundaries(context.Background(), asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).To(ContainSubstring(`data.conditionals[0].annotationSelector "team=gpu" matches annotations tenants write on their own groups (team)`))

	data["conditionals"] = "- annotationSelector: '" + v1alpha1.AnnotationOSFamily + " = windows'\n  defaults: {spec: {eks: {configuration: {volSize: 50}}}}\n"
	g.Expect(harness.WriteBoundaries(context.Background(), asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).NotTo(ContainSubstring("data.conditionals"))
}

// Attack 18 (N12, its --iam-path half), Section 3 (iam-path): --iam-path=/ would turn the controller policy's
// role${IAM_PATH}* into every role of the account; AWS's own paths are
// as bad. The manager refuses to start, naming the flag, before it
// serves anything. (The check is app's option validation, run here
// through app.NewManager against the suite's API server.)
func TestSection3RootIAMPathIsRefusedAtStart(t *testing.T) {
	requireEnv(t)
	for path, want := range map[string]string{
		"/":                       `--iam-path "/": the controller's IAM policy lets it create, pass and delete roles under its path, and "/" is every role of the account`,
		"/aws-service-role/mine/": `--iam-path "/aws-service-role/mine/": /aws-service-role/ is where AWS keeps the roles it creates itself`,
	} {
		t.Run(path, func(t *testing.T) {
			opts := app.Options{ControllerUsername: "system:serviceaccount:instance-manager:instance-manager", LeastPrivilege: app.LeastPrivilege{ClusterName: lpHomeCluster, IAMPath: path}}
			_, err := app.NewManager(environment.Config, opts)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(want)))
		})
	}
}

// Section 3 (clusterName): with the chart's clusterName "" the manager
// pins no cluster (a start-up warning; the suite's manager is pinned,
// TestGroupNamingAnotherClusterIsRefused). A tenant still cannot name a
// cluster: clusterName is a sensitive path, the admin's unless the
// ConfigMap shares it, whether or not the ConfigMap names it. As a tenant
// under a ConfigMap without a clusterName rule, in deny mode: refused.
func TestSection3ClusterNameIsTheAdminsWithoutARule(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-nopin")
	data := exampleConfigMapData(t)
	without := strings.Replace(data["boundaries"], "\n- spec.eks.configuration.clusterName\n", "\n", 1)
	if without == data["boundaries"] {
		t.Fatalf("the example ConfigMap has no clusterName rule to leave out:\n%s", data["boundaries"])
	}
	data["boundaries"], data["enforcement"] = without, "deny"
	g, ctx, tn := underBoundaries(t, data, "nopin-tenant", ns)
	ig := fullIG(ns, "elsewhere")
	ig.Spec.EKS.Configuration.ClusterName = "someone-elses-cluster"
	err := tn.client.Create(ctx, ig, client.DryRunAll)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/elsewhere"),
		ContainSubstring("spec.eks.configuration.clusterName is restricted by ConfigMap instance-manager/instance-manager"))))
}
