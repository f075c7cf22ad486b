package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The chart's PrometheusRule loads with Prometheus' own rule parser (what
// Prometheus does with the rule file the Operator writes): valid PromQL,
// valid templates in the annotations, every alert there, and every metric
// it reads is one the manager exports.
func TestPrometheusRuleLoadsInPrometheus(t *testing.T) {
	r := render(t, release{Namespace: "im-system", Values: map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "labels": map[string]any{"release": "prometheus"}}}})
	rule := r.one(t, "PrometheusRule")
	if rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack release=prometheus", rule.GetLabels())
	}
	spec, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, p)
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules: %v\n%s", errs, spec)
	}
	if _, errs := rulefmt.Parse([]byte(strings.Replace(string(spec), "max by", "maxx by", 1)), false, model.UTF8Validation, p); len(errs) == 0 {
		t.Fatal("the parser accepts a rule with an unknown function: it checks nothing")
	}
	exported := exportedMetrics(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, rl := range g.Rules {
			alerts = append(alerts, rl.Alert)
			expr, err := p.ParseExpr(rl.Expr)
			if err != nil {
				t.Fatalf("alert %s: %v", rl.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				if !strings.HasPrefix(vs.Name, "controller_runtime_") && !exported[vs.Name] {
					t.Errorf("alert %s reads %s, which the manager does not export", rl.Alert, vs.Name)
				}
				if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool { return m.String() == `job="instance-manager-metrics"` }) {
					t.Errorf("alert %s: %s is not limited to this release's metrics (job=\"instance-manager-metrics\")", rl.Alert, vs)
				}
				return nil
			})
		}
	}
	want := []string{"InstanceGroupError", "InstanceGroupRolloutStalled", "InstanceGroupNodeStartupFailures",
		"InstanceGroupNodeRepairHalted", "InstanceManagerAWSThrottling", "InstanceManagerWebhookErrors"}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
	if !strings.Contains(string(spec), "for: 10m") {
		t.Errorf("InstanceGroupError does not wait 10m:\n%s", spec)
	}
	if len(r.all("PrometheusRule")) != 1 || len(render(t, release{Namespace: "im-system"}).all("PrometheusRule")) != 0 {
		t.Error("the PrometheusRule is rendered exactly when prometheusRule.enabled")
	}
}

// exportedMetrics are the metric names the module's Go sources declare: the
// string literals "instance_manager_..." outside tests.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for rest := string(b); ; {
			var ok bool
			if _, rest, ok = strings.Cut(rest, `"instance_manager_`); !ok {
				break
			}
			name, _, _ := strings.Cut(rest, `"`)
			out["instance_manager_"+name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("found no metric declarations")
	}
	return out
}
