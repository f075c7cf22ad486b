package crdtemplate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

const seedTemplate = `apiVersion: upgrademgr.keikoproj.io/v1alpha1
kind: RollingUpgrade
metadata:
  name: rollup-nodes
  namespace: instance-manager
spec:
  asgName: {{ .InstanceGroup.Status.ActiveScalingGroupName }}
  group: {{ .InstanceGroup.Name }}
  max: {{ .InstanceGroup.Spec.EKS.MaxSize }}
`

func group(tmpl string) *v1alpha1.InstanceGroup {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "instance-manager", Name: "crd-group", CreationTimestamp: metav1.Now()},
		Spec: v1alpha1.InstanceGroupSpec{
			Strategy: v1alpha1.AwsUpgradeStrategy{Type: "crd", CRD: &v1alpha1.CRDUpgradeStrategy{Spec: tmpl}},
			EKS:      &v1alpha1.EKSSpec{MaxSize: 6, Configuration: &v1alpha1.EKSConfiguration{}},
		},
	}
	ig.Status.ActiveScalingGroupName = "cl-instance-manager-crd-group"
	for i := 0; i < 1000; i++ {
		ig.Spec.EKS.Configuration.Tags = append(ig.Spec.EKS.Configuration.Tags, map[string]string{"key": fmt.Sprint(i), "value": strings.Repeat("v", 100)})
	}
	return ig
}

func TestRenderSeedTemplate(t *testing.T) {
	u, err := Render(group(seedTemplate))
	if err != nil {
		t.Fatal(err)
	}
	spec := u.Object["spec"].(map[string]any)
	if spec["asgName"] != "cl-instance-manager-crd-group" || spec["group"] != "crd-group" || fmt.Sprint(spec["max"]) != "6" {
		t.Errorf("rendered spec = %v", spec)
	}
	if u.GetNamespace() != "instance-manager" || u.GetKind() != "RollingUpgrade" {
		t.Errorf("rendered %s %s", u.GetNamespace(), u.GetKind())
	}
}

func TestRenderIsBounded(t *testing.T) {
	head := "apiVersion: v1\nkind: ConfigMap\ndata:\n"
	for name, tc := range map[string]struct{ tmpl, err string }{
		"range over an integer literal":     {head + "{{range 100000000}}x{{end}}", "range may only iterate over a field"},
		"range over a field that is a size": {head + "{{range .InstanceGroup.Spec.EKS.MaxSize}}x{{end}}", "range can't iterate over 6"},
		"range over a function result":      {head + `{{range (len "abc")}}x{{end}}`, "range may only iterate over a field"},
		"range over a variable":             {head + "{{$n := 5}}{{range $n}}x{{end}}", "range may only iterate over a field"},
		"nested range":                      {head + "{{range .InstanceGroup.Spec.EKS.Configuration.Tags}}{{range $.InstanceGroup.Spec.EKS.Configuration.Tags}}x{{end}}{{end}}", "a range inside a range"},
		"printf width":                      {head + `  a: {{printf "%999999999d" 1}}`, "width or precision 999999999 is above 1024"},
		"printf star width":                 {head + `  a: {{printf "%*d" 999999999 1}}`, "* widths are not allowed"},
		"define and template":               {head + `{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`, "{{define}} and {{block}} are not allowed"},
		"output past the bound":             {head + "{{range .InstanceGroup.Spec.EKS.Configuration.Tags}}  k{{.key}}: {{.value}}\n{{end}}", "larger than 65536 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := Render(group(tc.tmpl))
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "spec.strategy.crd.spec") {
				t.Fatalf("Render error = %v, want one containing %q", err, tc.err)
			}
			if d := time.Since(start); d > MaxTime {
				t.Errorf("took %s", d)
			}
		})
	}
	// A range over the object's own list within the bound is fine.
	if _, err := Render(group(head + "{{range $i, $t := .InstanceGroup.Spec.EKS.Configuration.Tags}}{{if lt $i 3}}  k{{$t.key}}: v{{end}}\n{{end}}")); err != nil {
		t.Errorf("a bounded range was refused: %v", err)
	}
}

func TestPlacement(t *testing.T) {
	allowed := func(g, k string) bool { return g == "upgrademgr.keikoproj.io" && k == "RollingUpgrade" }
	ig := group(seedTemplate)
	for name, tc := range map[string]struct{ tmpl, err string }{
		"own namespace":      {seedTemplate, ""},
		"no namespace":       {strings.Replace(seedTemplate, "  namespace: instance-manager\n", "", 1), ""},
		"another namespace":  {strings.Replace(seedTemplate, "namespace: instance-manager", "namespace: kube-system", 1), `metadata.namespace "kube-system" is not the group's namespace "instance-manager"`},
		"a kind not allowed": {"apiVersion: instancemgr.keikoproj.io/v1alpha1\nkind: InstanceGroup\nmetadata: {name: payments-nodes}\n", "kind InstanceGroup.instancemgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: RollingUpgrade.upgrademgr.keikoproj.io)"},
		"a core kind":        {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "kind Pod is not allowed"},
	} {
		t.Run(name, func(t *testing.T) {
			ig.Spec.Strategy.CRD.Spec = tc.tmpl
			u, err := Render(ig)
			if err != nil {
				t.Fatal(err)
			}
			err = Placement(u, ig, allowed, "RollingUpgrade.upgrademgr.keikoproj.io")
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Placement = %v, want %q", err, tc.err)
			}
		})
	}
}
