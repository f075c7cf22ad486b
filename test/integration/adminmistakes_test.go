package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/test/harness"
)

// adminWithWarnings is the admin (system:masters) client, collecting the
// admission warnings it receives.
func adminWithWarnings(t *testing.T) (client.Client, *warningCollector) {
	t.Helper()
	w := &warningCollector{}
	cfg := rest.CopyConfig(environment.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// Attack 16 (N11), Section 3 (ancestor share); issue 25 item 7: "tenants own their
// configuration" written as shared.merge: [spec.eks.configuration] used to
// hand userData, metadataOptions, placement, volumes and lifecycle hooks to
// every tenant without a word. As admin: refused, naming the rule and the
// sensitive paths; accepted once each is named (here: kept restricted).
func TestAncestorRuleOverSensitivePathsIsRefused(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })

	data := exampleConfigMapData(t)
	data["boundaries"] = "shared:\n  merge: [spec.eks.configuration]\n"
	err := setConfigMap(ctx, data)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("ConfigMap instance-manager/instance-manager is refused"),
		ContainSubstring("shared.merge spec.eks.configuration shares sensitive paths it does not name"),
		ContainSubstring("spec.eks.configuration.userData"),
		ContainSubstring("spec.eks.configuration.metadataOptions"),
		ContainSubstring("shared.merge spec.eks-managed.configuration (implied by"),
		ContainSubstring("name each one in data.boundaries"))))

	var named []string
	for _, s := range boundaries.SensitivePaths {
		if strings.HasPrefix(s, "spec.eks.configuration.") || strings.HasPrefix(s, "spec.eks-managed.configuration.") {
			named = append(named, s)
		}
	}
	data["boundaries"] = "shared:\n  merge: [spec.eks.configuration]\nrestricted: [" + strings.Join(named, ", ") + "]\n"
	g.Expect(setConfigMap(ctx, data)).To(Succeed(), "every sensitive path named")
}

// Attack 17 (N11), Section 3 (relaxing a rule); issue 25 item 7: in warn mode a
// tenant's IMDS setting is replaced but kept in the submission; relaxing
// the rule later (sharing metadataOptions; excluding the namespace does
// the same) makes it effective again. As admin: the change is admitted
// with a warning naming the group and the path. (Excluding this
// namespace would be refused outright: the short group needs the
// defaults, and the dry run says so.)
func TestReadmittedSensitiveValuesAreWarned(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-resurrect")
	g, ctx, tn := underBoundaries(t, nil, "resurrect-tenant", ns)
	deleteGroupsAtEnd(t, ns)

	ig := shortIG(ns, "open-imds")
	ig.Spec.EKS.Configuration.MetadataOptions = &v1alpha1.MetadataOptions{HttpTokens: "optional"}
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed(), "warn mode admits it, without the IMDS setting")
	stored := &v1alpha1.InstanceGroup{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ig), stored)).To(Succeed())
	g.Expect(stored.Spec.EKS.Configuration.MetadataOptions).To(Or(BeNil(), HaveField("HttpTokens", Not(Equal("optional")))))
	// The controller has seen the group (its status is written from the
	// manager's cache, which the ConfigMap webhook reads).
	g.Eventually(func() []any {
		cur := &v1alpha1.InstanceGroup{}
		_ = admin.Get(ctx, client.ObjectKeyFromObject(ig), cur)
		var out []any
		for _, c := range cur.Status.Conditions {
			out = append(out, c)
		}
		return out
	}, harness.ConvergeTimeout, 200*time.Millisecond).ShouldNot(BeEmpty())

	asAdmin, warnings := adminWithWarnings(t)
	data := exampleConfigMapData(t)
	relaxed := strings.Replace(data["boundaries"], "- spec.strategy\n", "- spec.strategy\n  - spec.eks.configuration.metadataOptions\n", 1)
	g.Expect(relaxed).NotTo(Equal(data["boundaries"]), "the example's shared.replace list moved")
	data["boundaries"] = relaxed
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	g.Expect(harness.WriteBoundaries(ctx, asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).To(And(
		ContainSubstring("this change makes 1 InstanceGroup(s) take values their tenants submitted on sensitive paths"),
		ContainSubstring(ns+"/open-imds (spec.eks.configuration.metadataOptions)")))
}
