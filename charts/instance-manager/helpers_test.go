// Package chart tests the Helm chart: it renders it with bin/helm for several
// value sets and checks the renderings against the Go code they must agree
// with (webhooks.Configurations, the manager's flags, the boundary ConfigMap
// parser, controller-gen's CRD), then has the local control plane validate
// them (kubectl apply --dry-run=server), and runs the manager's certificate
// rotation under the chart's RBAC.
//
// The tests need the tools `make tools` builds: they find them through
// IM_ENV_BIN_DIR (set by `make test`) and skip without it.
package chart

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
)

// chartDir is this directory, the chart; repoRoot is the module root.
var chartDir, repoRoot = func() (string, string) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	return dir, filepath.Join(dir, "..", "..")
}()

// tool returns the path of a binary `make tools` builds into IM_ENV_BIN_DIR,
// skipping t when the variable is unset (the unit tier) and failing it when
// the binary is missing.
func tool(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv(env.BinDirEnv)
	if dir == "" {
		t.Skipf("needs %s (bin/%s): run make test", env.BinDirEnv, name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (%v): run make tools", path, err)
	}
	return path
}

// kubectl returns the path of kubectl, failing t when there is none.
func kubectl(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl not found: %v", err)
	}
	return path
}

// run runs a command and returns its standard output; stderr is included in
// the error.
func run(name string, args ...string) (string, error) {
	return runDir("", name, args...)
}

// runDir is run in the working directory dir ("" for the current one).
func runDir(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(err.Error() + ": " + stderr.String()))
	}
	return stdout.String(), nil
}

// release is what `helm template` is told: release name, namespace, values.
type release struct {
	Name      string
	Namespace string
	Values    map[string]any
}

func (r release) name() string {
	if r.Name == "" {
		return "instance-manager"
	}
	return r.Name
}

// writeValues writes values to a temporary file removed when t ends. (Not
// in t.TempDir: helm splits --values at commas, which test names may hold.)
func writeValues(t testing.TB, values map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp("", "im-chart-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// apiServerSource is the one value every install must give: the API
// server's source addresses for the webhook port's NetworkPolicy (values
// networkPolicy.webhookFrom, docs/install.md "Webhook network policy"); here the
// subnet of an EKS control plane's network interfaces.
var apiServerSource = []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}}

// withRequired returns values with networkPolicy.webhookFrom set to
// apiServerSource when they say nothing about networkPolicy (the tests of
// the policy itself give their own).
func withRequired(values map[string]any) map[string]any {
	if _, ok := values["networkPolicy"]; ok {
		return values
	}
	out := map[string]any{"networkPolicy": map[string]any{"webhookFrom": apiServerSource}}
	for k, v := range values {
		out[k] = v
	}
	return out
}

// template runs helm template for r (with withRequired's values) and
// returns the manifest and helm's error.
func template(t testing.TB, r release, extra ...string) (string, error) {
	t.Helper()
	args := []string{"template", r.name(), chartDir, "--namespace", r.Namespace, "--values", writeValues(t, withRequired(r.Values))}
	return run(tool(t, "helm"), append(args, extra...)...)
}

// rendering is one `helm template` output, parsed.
type rendering struct {
	manifest string
	objects  []*unstructured.Unstructured
}

// render renders r, failing t when helm fails.
func render(t testing.TB, r release) rendering {
	t.Helper()
	manifest, err := template(t, r)
	if err != nil {
		t.Fatalf("helm template %s -n %s: %v", r.name(), r.Namespace, err)
	}
	return rendering{manifest: manifest, objects: decodeObjects(t, manifest)}
}

// decodeObjects splits a multi-document manifest into objects.
func decodeObjects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode rendering: %v\n%s", err, manifest)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// all returns the objects of kind.
func (r rendering) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// find returns the object of kind named name (in any namespace), or nil.
func (r rendering) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.all(kind) {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}

// one returns the only object of kind, failing t unless there is exactly one.
func (r rendering) one(t testing.TB, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := r.all(kind)
	if len(objs) != 1 {
		t.Fatalf("rendering has %d %s objects, want 1", len(objs), kind)
	}
	return objs[0]
}

// typed converts o into the typed object into.
func typed[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	into := new(T)
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return into
}

// managerFlags parses the manager container's arguments of the rendered
// Deployment with the binary's own flags (app.Options and the zap flags
// main.go binds), failing t on an unknown or malformed flag.
func managerFlags(t testing.TB, r rendering) app.Options {
	t.Helper()
	d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		t.Fatal("the Deployment has no container named manager")
	}
	fs := flag.NewFlagSet("instance-manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts app.Options
	opts.BindFlags(fs)
	(&zap.Options{}).BindFlags(fs)
	c := d.Spec.Template.Spec.Containers[i]
	if len(c.Command) > 0 {
		t.Errorf("the manager container overrides the image's command: %v", c.Command)
	}
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the manager rejects the chart's arguments %q: %v", c.Args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("the manager ignores the chart's arguments %q", fs.Args())
	}
	return opts
}

// roleRules returns the rules of every rendered object of kind (Role or
// ClusterRole).
func roleRules(t testing.TB, r rendering, kind string) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, o := range r.all(kind) {
		switch kind {
		case "Role":
			rules = append(rules, typed[rbacv1.Role](t, o).Rules...)
		case "ClusterRole":
			rules = append(rules, typed[rbacv1.ClusterRole](t, o).Rules...)
		default:
			t.Fatalf("roleRules: %s is not a Role or ClusterRole", kind)
		}
	}
	return rules
}
