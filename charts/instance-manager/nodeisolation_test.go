package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart's node isolation policy is the one of examples/node-isolation
// (which the integration tier runs against the real API server): same
// spec, the binding's namespaces with the release namespace added; off by
// default.
func TestNodeIsolationPolicyIsTheExample(t *testing.T) {
	const name = "instance-manager-node-isolation"
	if render(t, release{Namespace: "instance-manager"}).find("ValidatingAdmissionPolicy", name) != nil {
		t.Fatal("the node isolation policy is rendered by default")
	}
	r := render(t, release{Namespace: "platform", Values: map[string]any{"nodeIsolation": map[string]any{"enabled": true}}})
	raw, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "examples", "node-isolation", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := rendering{objects: decodeObjects(t, string(raw))}
	policy, want := r.find("ValidatingAdmissionPolicy", name), example.one(t, "ValidatingAdmissionPolicy")
	if policy == nil {
		t.Fatalf("no ValidatingAdmissionPolicy %s with nodeIsolation.enabled", name)
	}
	if !reflect.DeepEqual(policy.Object["spec"], want.Object["spec"]) {
		t.Errorf("the chart's policy spec differs from the example's:\n%v\n%v", policy.Object["spec"], want.Object["spec"])
	}
	binding := r.find("ValidatingAdmissionPolicyBinding", name)
	if binding == nil {
		t.Fatalf("no ValidatingAdmissionPolicyBinding %s", name)
	}
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

// The config-excluded warning policy is always rendered, warns (never
// denies) on InstanceGroups, and names the boundary ConfigMap of the
// release (its configNamespace).
func TestConfigExcludedPolicyWarns(t *testing.T) {
	const name = "instance-manager-config-excluded"
	r := render(t, release{Namespace: "platform", Values: map[string]any{"configNamespace": "admin"}})
	policy, binding := r.find("ValidatingAdmissionPolicy", name), r.find("ValidatingAdmissionPolicyBinding", name)
	if policy == nil || binding == nil {
		t.Fatalf("policy %v, binding %v: want both rendered by default", policy != nil, binding != nil)
	}
	if p, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); p != name {
		t.Errorf("binding names policy %q", p)
	}
	if actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions"); !slices.Equal(actions, []string{"Warn"}) {
		t.Errorf("validation actions %v, want [Warn]: the annotation explains, it does not refuse", actions)
	}
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
	if len(rules) != 1 || !reflect.DeepEqual(rules[0].(map[string]any)["resources"], []any{"instancegroups"}) {
		t.Errorf("resource rules %v, want instancegroups only", rules)
	}
	validations, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations")
	if len(validations) != 1 {
		t.Fatalf("validations %v", validations)
	}
	msg, _ := validations[0].(map[string]any)["messageExpression"].(string)
	for _, want := range []string{"admin/instance-manager", "move this namespace into the ConfigMap\\'s excludedNamespaces"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message expression %q lacks %q", msg, want)
		}
	}
}
