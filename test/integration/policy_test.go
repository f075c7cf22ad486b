package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/reconciler/boundaryload"
	"github.com/instancemgr/instance-manager/reconciler/fanout"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/webhooks"
)

// The effective spec of examples/tenant-short.yaml under
// examples/boundaries-configmap.yaml (BOUNDARIES.md).
const tenantShortEffective = `
provisioner: eks
strategy:
  type: rollingUpdate
  rollingUpdate:
    maxUnavailable: 1
eks:
  minSize: 2
  maxSize: 4
  configuration:
    clusterName: a-managed-cluster
    subnets: [subnet-1234, subnet-2345, subnet-3456]
    keyPairName: a-managed-keypair
    image: ami-1234
    instanceType: t2.small
    labels:
      a-default-label: "true"
      test-label: "true"
    taints:
    - key: default-taint
      value: a-taint
      effect: NoSchedule
    roleName: a-managed-role
    instanceProfileName: a-managed-profile
    tags:
    - key: a-default-tag
      value: a-default-value
    - key: tag-key
      value: tag-value
    securityGroups: [sg-1234]
`

func tenantShortManifest(t *testing.T, namespace string) []byte {
	t.Helper()
	raw, err := os.ReadFile(examplePath("tenant-short.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(raw), "namespace: team-a", "namespace: "+namespace, 1))
}

func TestTenantShortManifestGetsTheDocumentedEffectiveSpec(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "alice", "team-a")

	out, err := tn.kubectl(t, tenantShortManifest(t, "team-a"), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)

	ig := getIG(t, "team-a", "my-instance-group")
	g.Expect(specJSON(t, ig)).To(Equal(yamlToMap(t, tenantShortEffective)))
	g.Expect(ig.Annotations).To(HaveKey(v1alpha1.AnnotationBoundariesHash))
	g.Expect(yamlToMap(t, ig.Annotations[v1alpha1.AnnotationSubmittedSpec])).To(Equal(yamlToMap(t, `
eks:
  minSize: 2
  maxSize: 4
  configuration:
    labels: {test-label: "true"}
    instanceType: t2.small
    tags: [{key: tag-key, value: tag-value}]
`)))
	// The fan-out reports the group current.
	g.Eventually(func() metav1.ConditionStatus {
		c := findCondition(getIG(t, "team-a", "my-instance-group"), v1alpha1.ConditionBoundariesApplied)
		if c == nil {
			return ""
		}
		return c.Status
	}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal(metav1.ConditionTrue),
		"the fan-out marks team-a/my-instance-group BoundariesApplied=True")
}

func TestRestrictedFieldIsOverriddenWithAWarning(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "bob", "team-warn")

	ig := shortIG("team-warn", "wants-own-image")
	ig.Spec.EKS.Configuration.Image = "ami-0123456789abcdef0"
	g.Expect(tn.client.Create(context.Background(), ig)).To(Succeed())

	warnings := tn.warnings.take()
	g.Expect(warnings).To(ContainElement(And(
		ContainSubstring("spec.eks.configuration.image"),
		ContainSubstring("instance-manager/instance-manager"),
		ContainSubstring(`"ami-1234"`))))
	g.Expect(getIG(t, "team-warn", "wants-own-image").Spec.EKS.Configuration.Image).To(Equal("ami-1234"))
	waitForEvent(t, "team-warn", "wants-own-image", webhooks.ReasonRestrictedOverride, "spec.eks.configuration.image")

	// kubectl prints the warning too.
	manifest := []byte(`apiVersion: instancemgr.keikoproj.io/v1alpha1
kind: InstanceGroup
metadata: {name: kubectl-own-image, namespace: team-warn}
spec:
  eks:
    minSize: 1
    maxSize: 2
    configuration: {instanceType: m5.large, image: ami-0fedcba9876543210}
`)
	out, err := tn.kubectl(t, manifest, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Warning: spec.eks.configuration.image is restricted by ConfigMap instance-manager/instance-manager"))
}

func TestRestrictedFieldIsDeniedInDenyMode(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	data := exampleConfigMapData(t)
	data["enforcement"] = "deny"
	mustSetConfigMap(t, data)
	defer mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "carol", "team-deny")

	ig := shortIG("team-deny", "wants-own-subnets")
	ig.Spec.EKS.Configuration.Subnets = []string{"subnet-mine"}
	err := tn.client.Create(context.Background(), ig)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(
		ContainSubstring("spec.eks.configuration.subnets"),
		ContainSubstring("ConfigMap instance-manager/instance-manager"),
		ContainSubstring(`["subnet-1234","subnet-2345","subnet-3456"]`)))

	// Without the restricted field the same group is admitted, and a later
	// attempt to set it is denied while other edits go through.
	ig = shortIG("team-deny", "wants-own-subnets")
	g.Expect(tn.client.Create(context.Background(), ig)).To(Succeed())
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"eks":{"configuration":{"keyPairName":"mine"}}}}`))
	err = tn.client.Patch(context.Background(), ig, patch)
	g.Expect(err).To(MatchError(ContainSubstring("spec.eks.configuration.keyPairName is restricted")))
	patch = client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"eks":{"maxSize":3}}}`))
	g.Expect(tn.client.Patch(context.Background(), ig, patch)).To(Succeed())
	g.Expect(getIG(t, "team-deny", "wants-own-subnets").Spec.EKS.MaxSize).To(BeEquivalentTo(3))
}

func TestApplyEditAndServerSideApplyConverge(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "dave", "team-apply")
	manifest := tenantShortManifest(t, "team-apply")
	want := yamlToMap(t, tenantShortEffective)

	// Client-side apply, twice: the second is a no-op.
	out, err := tn.kubectl(t, manifest, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	first := getIG(t, "team-apply", "my-instance-group")
	g.Expect(specJSON(t, first)).To(Equal(want))
	out, err = tn.kubectl(t, manifest, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	second := getIG(t, "team-apply", "my-instance-group")
	g.Expect(second.Generation).To(Equal(first.Generation), "re-applying the same short manifest must not change the spec")
	g.Expect(specJSON(t, second)).To(Equal(want))

	// An edit of one field (what kubectl edit sends: a patch of that field).
	out, err = tn.kubectl(t, nil, "patch", "ig", "my-instance-group", "--type=merge", "-p", `{"spec":{"eks":{"configuration":{"instanceType":"m5.xlarge"}}}}`)
	g.Expect(err).NotTo(HaveOccurred(), out)
	edited := getIG(t, "team-apply", "my-instance-group")
	g.Expect(edited.Spec.EKS.Configuration.InstanceType).To(Equal("m5.xlarge"))
	g.Expect(edited.Spec.EKS.Configuration.Image).To(Equal("ami-1234"))
	g.Expect(edited.Annotations[v1alpha1.AnnotationSubmittedSpec]).To(ContainSubstring(`"instanceType":"m5.xlarge"`))

	// The GitOps re-sync of the short manifest puts t2.small back, and only that.
	out, err = tn.kubectl(t, manifest, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(specJSON(t, getIG(t, "team-apply", "my-instance-group"))).To(Equal(want))

	// Server-side apply of the same short manifest converges to the same
	// effective spec, on a new object and on the existing one, and stays.
	ssa := []byte(strings.Replace(string(manifest), "name: my-instance-group", "name: ssa-group", 1))
	for i := 0; i < 3; i++ {
		out, err = tn.kubectl(t, ssa, "apply", "--server-side", "--field-manager=gitops", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(specJSON(t, getIG(t, "team-apply", "ssa-group"))).To(Equal(want), "server-side apply #%d", i+1)
	}
	g.Expect(getIG(t, "team-apply", "ssa-group").Generation).To(BeEquivalentTo(1), "re-applying must not change the spec")
	out, err = tn.kubectl(t, manifest, "apply", "--server-side", "--force-conflicts", "--field-manager=gitops", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(specJSON(t, getIG(t, "team-apply", "my-instance-group"))).To(Equal(want))
}

func TestBoundaryChangeFansOutAndSkipsExcludedNamespaces(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	// The admin's opt-out list is in the ConfigMap (excludedNamespaces).
	excluding := func(image string, namespaces ...string) map[string]string {
		data := exampleConfigMapData(t)
		data["defaults"] = strings.Replace(data["defaults"], "image: ami-1234", "image: "+image, 1)
		if len(namespaces) > 0 {
			data["excludedNamespaces"] = "[" + strings.Join(namespaces, ", ") + "]"
		}
		return data
	}
	mustSetConfigMap(t, excluding("ami-1234", "team-fan-x"))
	defer mustSetConfigMap(t, exampleConfigMapData(t))
	a := newTenant(t, "erin", "team-fan-a")
	b := newTenant(t, "frank", "team-fan-b")
	x := newTenant(t, "grace", "team-fan-x")

	g.Expect(a.client.Create(ctx, shortIG("team-fan-a", "one"))).To(Succeed())
	g.Expect(a.client.Create(ctx, shortIG("team-fan-a", "two"))).To(Succeed())
	g.Expect(b.client.Create(ctx, shortIG("team-fan-b", "three"))).To(Succeed())
	excluded := fullIG("team-fan-x", "system-group")
	// The example's cluster: opting the namespace back in must not move a
	// group whose identity is recorded to another cluster (refused,
	// TestAttack14ProvisionerSwitchWithResourcesIsRefused).
	excluded.Spec.EKS.Configuration.ClusterName = lpHomeCluster
	g.Expect(x.client.Create(ctx, excluded)).To(Succeed())
	g.Expect(getIG(t, "team-fan-x", "system-group").Spec.EKS.Configuration.Image).To(Equal("ami-0aaaaaaaaaaaaaaaa"))
	// The fan-out announces a move from one boundaries revision to another
	// (BoundariesApplied Event); wait until it has marked each group with
	// the first one, so that the change below is such a move.
	for _, key := range [][2]string{{"team-fan-a", "one"}, {"team-fan-a", "two"}, {"team-fan-b", "three"}} {
		g.Eventually(func() metav1.ConditionStatus {
			if c := findCondition(getIG(t, key[0], key[1]), v1alpha1.ConditionBoundariesApplied); c != nil {
				return c.Status
			}
			return ""
		}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal(metav1.ConditionTrue), "the fan-out marks %s/%s current", key[0], key[1])
	}

	// The admin rolls out a new AMI.
	g.Expect(setConfigMap(ctx, excluding("ami-5678", "team-fan-x"))).To(Succeed())
	for _, key := range [][2]string{{"team-fan-a", "one"}, {"team-fan-a", "two"}, {"team-fan-b", "three"}} {
		g.Eventually(func() string {
			return getIG(t, key[0], key[1]).Spec.EKS.Configuration.Image
		}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal("ami-5678"), "the fan-out re-admits %s/%s with the new image", key[0], key[1])
		ig := getIG(t, key[0], key[1])
		g.Expect(ig.Spec.EKS.Configuration.InstanceType).To(Equal("m5.large"), "the tenant's own values stay")
	}
	waitForEvent(t, "team-fan-a", "one", fanout.ReasonBoundariesApplied, "")
	g.Consistently(func() string {
		return getIG(t, "team-fan-x", "system-group").Spec.EKS.Configuration.Image
	}, 2*time.Second, 200*time.Millisecond).Should(Equal("ami-0aaaaaaaaaaaaaaaa"), "an excluded namespace is left alone")

	// Opting the namespace back in re-admits its groups under the boundaries.
	g.Expect(setConfigMap(ctx, excluding("ami-5678"))).To(Succeed())
	g.Eventually(func() string {
		return getIG(t, "team-fan-x", "system-group").Spec.EKS.Configuration.Image
	}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal("ami-5678"), "opting team-fan-x back in re-admits its group under the boundaries")

	// Opting team-fan-b out would leave its short group without defaults,
	// which cannot work: the ConfigMap webhook refuses the change, naming
	// the group, and the stored spec is kept.
	err := setConfigMap(ctx, excluding("ami-5678", "team-fan-b"))
	g.Expect(err).To(MatchError(And(ContainSubstring("team-fan-b/three"), ContainSubstring("spec.eks.configuration.clusterName"))))
	g.Expect(getIG(t, "team-fan-b", "three").Spec.EKS.Configuration.Image).To(Equal("ami-5678"))
}

func TestInvalidConfigMapIsRejectedAndChangesNothing(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	mustSetConfigMap(t, exampleConfigMapData(t))
	// The ConfigMap webhook names at most 10 broken groups; start from none
	// so that this test's group is among them whatever ran before.
	deleteAllGroups(t)
	tn := newTenant(t, "heidi", "team-invalid")
	keep := shortIG("team-invalid", "keep-me")
	g.Expect(tn.client.Create(ctx, keep)).To(Succeed())
	// The ConfigMap webhook's dry run lists groups from the manager's
	// cache: a case run right after the create could miss the group.
	awaitObserved(t, keep)
	before := getIG(t, "team-invalid", "keep-me")

	cases := map[string]struct {
		edit func(map[string]string)
		want []string
	}{
		"unknown path": {
			edit: func(d map[string]string) { d["boundaries"] += "    - spec.eks.configuration.imag\n" },
			want: []string{"spec.eks.configuration.imag"},
		},
		"malformed YAML": {
			edit: func(d map[string]string) { d["defaults"] = "spec: [unclosed" },
			want: []string{"data.defaults"},
		},
		"defaults that are not an InstanceGroup spec": {
			edit: func(d map[string]string) { d["defaults"] = "spec:\n  eks:\n    configuration:\n      imageId: ami-1\n" },
			want: []string{"imageId"},
		},
		"a change that breaks existing groups": {
			edit: func(d map[string]string) {
				d["defaults"] = strings.Replace(d["defaults"], "clusterName: a-managed-cluster", "", 1)
			},
			want: []string{"team-invalid/keep-me", "spec.eks.configuration.clusterName"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			data := exampleConfigMapData(t)
			tc.edit(data)
			err := setConfigMap(ctx, data)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("ConfigMap instance-manager/instance-manager"))
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
	after := getIG(t, "team-invalid", "keep-me")
	g.Expect(after.Generation).To(Equal(before.Generation))
	g.Expect(after.Spec).To(Equal(before.Spec))
	g.Expect(after.Annotations).To(Equal(before.Annotations))
}

func TestInvalidConfigMapPastTheWebhookKeepsTheLastValidBoundaries(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "ivan", "team-bypass")
	g.Expect(tn.client.Create(ctx, shortIG("team-bypass", "steady"))).To(Succeed())
	before := getIG(t, "team-bypass", "steady")

	// The admin's webhook for the ConfigMap is down (removed), and a
	// broken ConfigMap gets in.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, vwc)).To(Succeed())
	saved := vwc.DeepCopy()
	var kept []admissionregistrationv1.ValidatingWebhook
	for _, w := range vwc.Webhooks {
		if !strings.HasPrefix(w.Name, "boundaries.") {
			kept = append(kept, w)
		}
	}
	vwc.Webhooks = kept
	g.Expect(admin.Update(ctx, vwc)).To(Succeed())
	defer func() {
		cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, cur)).To(Succeed())
		cur.Webhooks = saved.Webhooks
		g.Expect(admin.Update(ctx, cur)).To(Succeed())
		mustSetConfigMap(t, exampleConfigMapData(t))
	}()
	g.Eventually(func() error {
		return setConfigMap(ctx, map[string]string{"boundaries": "restricted: [spec.nope]", "defaults": "spec: {provisioner: eks}"})
	}, harness.ConvergeTimeout, harness.PollInterval).Should(Succeed(), "the API server stops calling the removed ConfigMap webhook")

	waitForEvent(t, configNamespace, app.ConfigMapName, boundaryload.ReasonBoundariesInvalid, "spec.nope")
	g.Consistently(func() []any {
		ig := getIG(t, "team-bypass", "steady")
		return []any{ig.Generation, ig.Annotations[v1alpha1.AnnotationBoundariesHash]}
	}, 2*time.Second, 200*time.Millisecond).Should(Equal([]any{before.Generation, before.Annotations[v1alpha1.AnnotationBoundariesHash]}),
		"nothing fans out from an invalid ConfigMap")
	// New groups still get the last valid boundaries.
	g.Expect(tn.client.Create(ctx, shortIG("team-bypass", "new"))).To(Succeed())
	g.Expect(getIG(t, "team-bypass", "new").Spec.EKS.Configuration.ClusterName).To(Equal("a-managed-cluster"))
}

func TestTenantCannotForgeProvenanceAnnotations(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	mustSetConfigMap(t, exampleConfigMapData(t))
	tn := newTenant(t, "mallory", "team-forge")

	forged := shortIG("team-forge", "forged")
	forged.Annotations = map[string]string{v1alpha1.AnnotationSubmittedSpec: `{"provisioner":"eks"}`}
	err := tn.client.Create(ctx, forged)
	g.Expect(err).To(MatchError(ContainSubstring("instancemgr.keikoproj.io/submitted-spec] is written by instance-manager only")))

	ig := shortIG("team-forge", "honest")
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	for _, key := range []string{v1alpha1.AnnotationSubmittedSpec, v1alpha1.AnnotationBoundariesHash} {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+key+`":"{}"}}}`))
		err := tn.client.Patch(ctx, ig, patch)
		g.Expect(err).To(MatchError(ContainSubstring(key+"] is written by instance-manager only")), key)
	}
}

func TestSeedExamplesPassServerDryRun(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	// With the crd strategy opt-in that eks-crd-strategy.yaml documents
	// (the example ConfigMap allows no kind).
	mustSetConfigMap(t, withCRDStrategy(t))
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	admin := newTenant(t, "system:admin-examples", configNamespace)
	_ = newTenant(t, "system:admin-examples", "team-a")
	entries, err := os.ReadDir(examplePath(""))
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") || e.Name() == "boundaries-configmap.yaml" {
			continue
		}
		raw, err := os.ReadFile(examplePath(e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		g.Expect(yaml.Unmarshal(raw, &meta)).To(Succeed())
		tn := admin
		tn.namespace = meta.Metadata.Namespace
		out, err := tn.kubectl(t, raw, "apply", "--dry-run=server", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), "%s: %s", e.Name(), out)
		g.Expect(out).To(ContainSubstring("(server dry run)"), e.Name())
		n++
	}
	g.Expect(n).To(BeNumerically(">=", 6))
}

// shortIG is what a tenant typically submits under the example boundaries.
func shortIG(namespace, name string) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{
			MinSize: 1, MaxSize: 3,
			Configuration: &v1alpha1.EKSConfiguration{InstanceType: "m5.large", Labels: map[string]string{"team": namespace}},
		}},
	}
}

// fullIG is a complete group that needs no defaults.
func fullIG(namespace, name string) *v1alpha1.InstanceGroup {
	ig := shortIG(namespace, name)
	ig.Spec.Provisioner = v1alpha1.ProvisionerEKS
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate}
	c := ig.Spec.EKS.Configuration
	c.ClusterName, c.Image, c.Subnets, c.SecurityGroups = "system-cluster", "ami-0aaaaaaaaaaaaaaaa", []string{"subnet-sys"}, []string{"sg-sys"}
	return ig
}

func findCondition(ig *v1alpha1.InstanceGroup, typ string) *metav1.Condition {
	for i := range ig.Status.Conditions {
		if ig.Status.Conditions[i].Type == typ {
			return &ig.Status.Conditions[i]
		}
	}
	return nil
}
