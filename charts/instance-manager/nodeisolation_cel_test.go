package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The node isolation policy's decisions (examples/node-isolation, which
// the chart renders unchanged), each validation evaluated with CEL as the
// API server binds it (request, object, variables): a pod of team-b is
// refused when it names a node (N24), tolerates team-a's taint or every
// taint, or selects team-a's nodes; its own toleration, an update of a
// bound pod and a kubelet's mirror pod pass. The integration and e2e
// tiers run the same policy in the API server.
func TestNodeIsolationPolicyDecisions(t *testing.T) {
	validations := isolationValidations(t)
	const key = "instancemgr.keikoproj.io/namespace"
	tenant := []string{"system:authenticated"}
	kubelet := []string{"system:nodes", "system:authenticated"}
	for _, c := range []struct {
		name   string
		op     string
		groups []string
		spec   corev1.PodSpec
		refuse string // the message's start, "" when admitted
	}{
		{"plain pod", "CREATE", tenant, corev1.PodSpec{}, ""},
		{"nodeName on create", "CREATE", tenant, corev1.PodSpec{NodeName: "ip-10-0-12-34.ec2.internal"},
			"spec.nodeName: a pod of namespace team-b may not name its node (ip-10-0-12-34.ec2.internal)"},
		{"nodeName with its own toleration", "CREATE", tenant, corev1.PodSpec{NodeName: "n1",
			Tolerations: []corev1.Toleration{{Key: key, Value: "team-b"}}}, "spec.nodeName:"},
		{"update of a bound pod", "UPDATE", tenant, corev1.PodSpec{NodeName: "n1"}, ""},
		{"a kubelet's mirror pod", "CREATE", kubelet, corev1.PodSpec{NodeName: "n1"}, ""},
		{"own toleration, no effect", "CREATE", tenant, corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: "team-b"}}}, ""},
		{"own toleration, NoExecute", "CREATE", tenant, corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: key, Value: "team-b", Effect: corev1.TaintEffectNoExecute}}}, ""},
		{"another namespace's toleration", "CREATE", tenant, corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: key, Value: "team-a"}}}, "spec.tolerations:"},
		{"tolerate every taint", "CREATE", tenant, corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, "spec.tolerations:"},
		{"tolerate the key", "CREATE", tenant, corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists}}}, "spec.tolerations:"},
		{"added toleration on update", "UPDATE", tenant, corev1.PodSpec{NodeName: "n1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, "spec.tolerations:"},
		{"select another namespace's nodes", "CREATE", tenant, corev1.PodSpec{NodeSelector: map[string]string{key: "team-a"}}, "spec.nodeSelector["},
		{"select its own nodes", "CREATE", tenant, corev1.PodSpec{NodeSelector: map[string]string{key: "team-b", corev1.LabelHostname: "n1"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: c.spec}
			pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
			object, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(pod)
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]any{
				"request":   map[string]any{"operation": c.op, "namespace": "team-b", "userInfo": map[string]any{"username": "u", "groups": c.groups}},
				"object":    object,
				"variables": map[string]any{"key": key},
			}
			var refused []string
			for _, v := range validations {
				ok, msg := v(t, vars)
				if !ok {
					refused = append(refused, msg)
				}
			}
			switch {
			case c.refuse == "" && len(refused) > 0:
				t.Errorf("refused: %q", refused)
			case c.refuse != "" && (len(refused) != 1 || !strings.HasPrefix(refused[0], c.refuse)):
				t.Errorf("refusals %q, want one starting %q", refused, c.refuse)
			}
		})
	}
}

// isolationValidations compiles each validation of the example policy
// into a function returning whether it admits and its message.
func isolationValidations(t *testing.T) []func(*testing.T, map[string]any) (bool, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "node-isolation", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict([]byte(strings.Split(string(raw), "\n---\n")[0]), policy); err != nil {
		t.Fatal(err)
	}
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("variables", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(expr string) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		return prg
	}
	var out []func(*testing.T, map[string]any) (bool, string)
	for _, v := range policy.Spec.Validations {
		check, message := compile(v.Expression), compile(v.MessageExpression)
		out = append(out, func(t *testing.T, vars map[string]any) (bool, string) {
			t.Helper()
			res, _, err := check.Eval(vars)
			if err != nil {
				t.Fatalf("%s: %v (the API server would refuse: failurePolicy Fail)", v.Expression, err)
			}
			if res.Value() == true {
				return true, ""
			}
			msg, _, err := message.Eval(vars)
			if err != nil {
				t.Fatalf("%s: %v", v.MessageExpression, err)
			}
			return false, msg.Value().(string)
		})
	}
	return out
}
