package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart's node isolation policy is the one of examples/node-isolation
// (which the integration tier runs against the real API server): same
// spec, the binding's namespaces with the release namespace added; off by
// default.
func TestNodeIsolationPolicyIsTheExample(t *testing.T) {
	if len(render(t, release{Namespace: "instance-manager"}).all("ValidatingAdmissionPolicy")) != 0 {
		t.Fatal("the node isolation policy is rendered by default")
	}
	r := render(t, release{Namespace: "platform", Values: map[string]any{"nodeIsolation": map[string]any{"enabled": true}}})
	raw, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "examples", "node-isolation", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := rendering{objects: decodeObjects(t, string(raw))}
	policy, want := r.one(t, "ValidatingAdmissionPolicy"), example.one(t, "ValidatingAdmissionPolicy")
	if !reflect.DeepEqual(policy.Object["spec"], want.Object["spec"]) {
		t.Errorf("the chart's policy spec differs from the example's:\n%v\n%v", policy.Object["spec"], want.Object["spec"])
	}
	binding := r.one(t, "ValidatingAdmissionPolicyBinding")
	if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != policy.GetName() {
		t.Errorf("binding names policy %q, the policy is %q", name, policy.GetName())
	}
	exprs, _, _ := unstructured.NestedSlice(binding.Object, "spec", "matchResources", "namespaceSelector", "matchExpressions")
	if len(exprs) != 1 {
		t.Fatalf("binding namespace selector %v", exprs)
	}
	var values []string
	for _, v := range exprs[0].(map[string]any)["values"].([]any) {
		values = append(values, v.(string))
	}
	if !slices.Equal(values, []string{"kube-system", "kube-public", "kube-node-lease", "platform"}) {
		t.Errorf("excluded namespaces %v, want the system ones and the release namespace", values)
	}
	if actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions"); !slices.Equal(actions, []string{"Deny"}) {
		t.Errorf("validation actions %v", actions)
	}
}
