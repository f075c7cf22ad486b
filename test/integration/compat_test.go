package integration

// Deliberate differences from keikoproj instance-manager, explained where
// the user meets them (issue 27 item 3; docs/compatibility.md, "Compatibility with
// keikoproj instance-manager").

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/test/install"
)

// applyChartPolicy renders one template of the chart (a
// ValidatingAdmissionPolicy and its binding) and creates both, removed when
// the test ends.
func applyChartPolicy(t *testing.T, template string) {
	t.Helper()
	helm, err := install.Helm()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helm, "template", "im", filepath.Join(repoRoot, "charts", "instance-manager"),
		"--namespace", harness.ConfigNamespace, "--set", "clusterName=c", "--set", "networkPolicy.enabled=false",
		"--show-only", template).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	docs := strings.Split(string(out), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s: %d documents, want the policy and its binding", template, len(docs))
	}
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(docs[0], "---\n")), policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() { // why a policy did nothing: its type checking
			cur := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(policy), cur); err == nil {
				t.Logf("policy %s status: %+v", cur.Name, cur.Status)
			}
		}
	})
	for _, o := range []client.Object{policy, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
}

// A group created in a namespace that carries keikoproj's
// config-excluded annotation is admitted under the boundaries, with a
// warning naming the annotation and what to do instead; a namespace
// without it gets no such warning.
func TestConfigExcludedNamespaceAnnotationWarns(t *testing.T) {
	requireEnv(t)
	applyChartPolicy(t, "templates/configexcluded.yaml")
	const want = "move this namespace into the ConfigMap's excludedNamespaces"

	g, ctx, plain := underBoundaries(t, nil, "erin", uniqueNamespace("compat-plain"))
	annotatedNS := uniqueNamespace("compat-annotated")
	annotated := newTenant(t, "frank", annotatedNS)
	ensureNamespace(t, annotatedNS, map[string]string{v1alpha1.AnnotationConfigExcluded: "true"}) // after newTenant, which writes none

	// The policy takes effect once the API server has loaded it: dry runs
	// until the warning shows.
	g.Eventually(func() []string {
		annotated.warnings.take()
		ig := shortIG(annotatedNS, "probe")
		if err := annotated.client.Create(ctx, ig, client.DryRunAll); err != nil {
			return []string{err.Error()}
		}
		return annotated.warnings.take()
	}, time.Minute, time.Second).Should(ContainElement(And(
		ContainSubstring("namespace "+annotatedNS+" carries the annotation "+v1alpha1.AnnotationConfigExcluded+", which is no longer read (keikoproj instance-manager read it)"),
		ContainSubstring(want))))

	annotated.warnings.take()
	ig := shortIG(annotatedNS, "g")
	g.Expect(annotated.client.Create(ctx, ig)).To(Succeed(), "the annotation warns, it does not refuse")
	// Left, the group would make later tests' ConfigMaps invalid.
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ig) })
	g.Expect(annotated.warnings.take()).To(ContainElement(ContainSubstring(want)))
	stored := &v1alpha1.InstanceGroup{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ig), stored)).To(Succeed())
	g.Expect(stored.Annotations).To(HaveKey(v1alpha1.AnnotationBoundariesHash), "the boundaries applied: the annotation opted nothing out")

	plain.warnings.take()
	plainIG := shortIG(plain.namespace, "g")
	g.Expect(plain.client.Create(ctx, plainIG)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), plainIG) })
	g.Expect(plain.warnings.take()).NotTo(ContainElement(ContainSubstring(v1alpha1.AnnotationConfigExcluded)))
}

// The original's forms through the real API server (the CRD accepts them,
// the mutating webhook turns them into ours; dry runs, so nothing is
// built): metadataOptions.httpPutHopLimit is stored as
// httpPutResponseHopLimit; the same value under both names with different
// values, and a Fargate tag key given twice with different values, are
// refused naming the field path.
func TestOriginalsFormsThroughTheAPIServer(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	mustSetConfigMap(t, exampleConfigMapData(t))
	group := func(name string, edit func(spec map[string]any)) *unstructured.Unstructured {
		o := toJSONMap(t, fullIG(harness.ConfigNamespace, name))
		delete(o, "status")
		o["apiVersion"], o["kind"] = v1alpha1.GroupVersion.String(), "InstanceGroup"
		edit(o["spec"].(map[string]any))
		return &unstructured.Unstructured{Object: o}
	}
	metadataOptions := func(m map[string]any) func(map[string]any) {
		return func(spec map[string]any) {
			spec["eks"].(map[string]any)["configuration"].(map[string]any)["metadataOptions"] = m
		}
	}

	u := group("compat-hop", metadataOptions(map[string]any{"httpTokens": "required", "httpPutHopLimit": int64(2)}))
	g.Expect(admin.Create(ctx, u, client.DryRunAll)).To(Succeed(), "the original's name of the hop limit is admitted")
	got, _, _ := unstructured.NestedMap(u.Object, "spec", "eks", "configuration", "metadataOptions")
	g.Expect(got).To(Equal(map[string]any{"httpTokens": "required", "httpPutResponseHopLimit": int64(2)}), "stored under our name")

	err := admin.Create(ctx, group("compat-hop-both", metadataOptions(map[string]any{"httpPutHopLimit": int64(2), "httpPutResponseHopLimit": int64(3)})), client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring(
		"spec.eks.configuration.metadataOptions.httpPutHopLimit: Invalid value: 2: is keikoproj instance-manager's name of spec.eks.configuration.metadataOptions.httpPutResponseHopLimit, which is set to 3")))

	err = admin.Create(ctx, group("compat-tags", func(spec map[string]any) {
		spec["eks-fargate"] = map[string]any{"tags": []any{map[string]any{"a": "1"}, map[string]any{"a": "2"}}}
	}), client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring(`spec.eks-fargate.tags[1][a]: Invalid value: "2": tag "a" is already set to "1" by spec.eks-fargate.tags[0][a]`)))
}
