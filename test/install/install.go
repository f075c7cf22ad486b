// Package install installs instance-manager the way users do, with the Helm
// chart, into a local environment (test/env), and runs the built container
// image (make image) out of cluster as one replica of the chart's
// Deployment would run: the image's entrypoint under chroot in its
// unpacked file system, as its non-root user, with the chart's arguments,
// as the chart's ServiceAccount (a token from the TokenRequest API, so the
// API server applies exactly the chart's RBAC), serving the chart's
// webhook configurations with the certificate its own rotator issues.
//
// Its TestHelmInstall and the demo (test/demo, `make demo`) use it. Its
// parts:
//   - Cloud: the cluster admin's AWS resources, created in moto;
//   - Boundaries / ChartValues: the example boundary ConfigMap, adapted to
//     the Cloud's ids, as chart values;
//   - Install: helm install;
//   - StartManager: the image's entrypoint in a process of its own, and the
//     kubelet's part (projecting the ServiceAccount token and the
//     certificate Secret into its file system) played by goroutines;
//   - NewTenant: a namespace owner, an impersonated user with a Role.
package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

// Release defaults: the chart installed as users are told to install it.
const (
	// ReleaseName is the Helm release name; with it the chart's objects are
	// all named "instance-manager".
	ReleaseName = "instance-manager"
	// Namespace is the release namespace, which is also the boundary
	// ConfigMap's (the chart's default configNamespace).
	Namespace = "instance-manager"
)

// RepoRoot returns the root of the instance-manager checkout this package
// was built from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ChartDir returns the directory of the Helm chart.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "instance-manager") }

// Example returns the example manifest name of the project's examples/
// directory (e.g. boundaries-configmap.yaml, tenant-short.yaml).
func Example(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(RepoRoot(), "examples", name))
}

// ExampleBoundaries returns the admin's example boundary ConfigMap
// (boundaries-configmap.yaml), decoded strictly.
func ExampleBoundaries() (*corev1.ConfigMap, error) {
	b, err := Example("boundaries-configmap.yaml")
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(b, cm); err != nil {
		return nil, fmt.Errorf("decoding boundaries-configmap.yaml: %w", err)
	}
	return cm, nil
}

// ExampleTenantGroup returns the tenant's short InstanceGroup
// (tenant-short.yaml), decoded strictly.
func ExampleTenantGroup() (*v1alpha1.InstanceGroup, error) {
	b, err := Example("tenant-short.yaml")
	if err != nil {
		return nil, err
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := yaml.UnmarshalStrict(b, ig); err != nil {
		return nil, fmt.Errorf("decoding tenant-short.yaml: %w", err)
	}
	return ig, nil
}

// ChartValues returns the values the chart is installed with here:
//   - boundaryConfigMap: the ConfigMap data given (each key a YAML string,
//     as in a ConfigMap), as the YAML objects the chart takes, create: true;
//   - certManager.enabled: false, so the manager rotates its own
//     certificate (--cert-rotation);
//   - a nodeSelector no node has, which holds the Deployment's pods
//     Pending: the manager runs in the calling process instead (the local
//     environment runs no container images);
//   - networkPolicy.webhookFrom: the local API server's address (the
//     chart requires the API server's source; the local world has no CNI,
//     so the policy is rendered but not enforced);
//   - extraArgs: extra manager flags, e.g. shorter intervals.
//
// Errors: a data key that is not YAML.
func ChartValues(boundaries map[string]string, extraArgs ...string) (map[string]any, error) {
	cm := map[string]any{"create": true}
	for k, v := range boundaries {
		var parsed any
		if err := yaml.Unmarshal([]byte(v), &parsed); err != nil {
			return nil, fmt.Errorf("boundary ConfigMap key %s is not YAML: %w", k, err)
		}
		cm[k] = parsed
	}
	values := map[string]any{
		"boundaryConfigMap": cm,
		"certManager":       map[string]any{"enabled": false},
		"nodeSelector":      map[string]any{OutOfClusterNodeLabel: "true"},
		"networkPolicy":     map[string]any{"webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "127.0.0.1/32"}}}},
	}
	if len(extraArgs) > 0 {
		values["extraArgs"] = extraArgs
	}
	return values, nil
}

// OutOfClusterNodeLabel is the nodeSelector key ChartValues gives the
// chart's pods: no node has it, so they stay Pending while StartManager
// runs the replica outside the cluster.
const OutOfClusterNodeLabel = "instancemgr.keikoproj.io/demo-runs-out-of-cluster"

// Release is an installed Helm release of the chart.
type Release struct {
	// Name and Namespace of the release.
	Name, Namespace string
	// Output is what helm install printed (status and NOTES).
	Output string
	// Deployment is the manager Deployment as installed: its pod template
	// carries the arguments, environment and ServiceAccount a replica runs
	// with.
	Deployment *appsv1.Deployment
}

// ServiceAccount returns the name of the ServiceAccount the chart's pods
// run as.
func (r *Release) ServiceAccount() string { return r.Deployment.Spec.Template.Spec.ServiceAccountName }

// ManagerContainer returns the Deployment's container named "manager".
// Errors: there is none.
func (r *Release) ManagerContainer() (corev1.Container, error) {
	for _, c := range r.Deployment.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("Deployment %s/%s has no container named manager", r.Deployment.Namespace, r.Deployment.Name)
}

// Helm returns the path of bin/helm as `make tools` builds it (in
// IM_ENV_BIN_DIR). Errors: the variable is unset or the file missing.
func Helm() (string, error) {
	dir := os.Getenv(env.BinDirEnv)
	if dir == "" {
		return "", env.ErrNoEnvironment
	}
	path := filepath.Join(dir, "helm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing (%v): run make tools", path, err)
	}
	return path, nil
}

// Install runs `helm install ReleaseName <chart> --namespace Namespace
// --create-namespace` for the chart of this checkout; see InstallChart.
func Install(ctx context.Context, e *env.Environment, values map[string]any) (*Release, error) {
	return InstallChart(ctx, e, ChartDir(), values)
}

// InstallChart runs `helm install ReleaseName chart --namespace Namespace
// --create-namespace` against the environment's kubeconfig with values;
// chart is a chart directory or a packaged .tgz. It returns the release
// with its manager Deployment as the API server stored it. Helm installs
// the CRDs from the chart's crds/ first and does not wait for the
// Deployment. Errors: helm failing (with its output) or the Deployment
// missing afterwards.
func InstallChart(ctx context.Context, e *env.Environment, chart string, values map[string]any) (*Release, error) {
	return helmRelease(ctx, e, values, "install", ReleaseName, chart, "--create-namespace")
}

// Upgrade runs `helm upgrade ReleaseName chart --namespace Namespace`
// with values, as InstallChart does. Helm leaves the CRDs as they are:
// apply the new ones first (ApplyCRDs), the documented upgrade step.
func Upgrade(ctx context.Context, e *env.Environment, chart string, values map[string]any) (*Release, error) {
	return helmRelease(ctx, e, values, "upgrade", ReleaseName, chart)
}

// helmRelease runs helm with args, the release namespace, the
// environment's kubeconfig and values, and reads the release's manager
// Deployment.
func helmRelease(ctx context.Context, e *env.Environment, values map[string]any, args ...string) (*Release, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	// Not under a directory whose name holds a comma: helm splits
	// --values at commas.
	f, err := os.CreateTemp("", "im-install-values-*.yaml")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(b); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	args = append(args, "--namespace", Namespace, "--kubeconfig", e.Kubeconfig, "--values", f.Name())
	cmd := exec.CommandContext(ctx, helm, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args[:3], " "), err, strings.TrimSpace(out.String()))
	}
	rel := &Release{Name: ReleaseName, Namespace: Namespace, Output: out.String()}
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	list, err := kube.AppsV1().Deployments(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + ReleaseName})
	if err != nil {
		return nil, fmt.Errorf("listing the release's Deployments: %w", err)
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("the release has %d Deployments in %s, want 1", len(list.Items), Namespace)
	}
	rel.Deployment = &list.Items[0]
	return rel, nil
}

// adminClient returns a clientset for the environment's admin.
func adminClient(cfg *rest.Config) (kubernetes.Interface, error) {
	if cfg == nil {
		return nil, errors.New("no admin rest.Config")
	}
	return kubernetes.NewForConfig(cfg)
}
