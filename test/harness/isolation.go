package harness

import (
	"context"
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ApplyNodeIsolationPolicy creates the ValidatingAdmissionPolicy and its
// binding of examples/node-isolation/policy.yaml (the chart's with
// nodeIsolation.enabled) through c, and deletes them when t ends. The API
// server enforces a new policy a moment later: wait for a refusal before
// relying on it.
func ApplyNodeIsolationPolicy(t testing.TB, c client.Client) {
	t.Helper()
	raw, err := os.ReadFile(ExamplesPath("node-isolation/policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("examples/node-isolation/policy.yaml: %d documents, want the policy and its binding", len(docs))
	}
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}
