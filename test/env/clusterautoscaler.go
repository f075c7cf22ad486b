package env

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The real Kubernetes cluster-autoscaler (AWS provider), built by
// `make tools` into IM_ENV_BIN_DIR from the source tarball the Makefile's
// CA_SOURCE names (docs/autoscaling.md, "Autoscaling").
const (
	// ClusterAutoscalerBinary is its file name in IM_ENV_BIN_DIR.
	ClusterAutoscalerBinary = "cluster-autoscaler"
	// SkipClusterAutoscalerEnv set to 1 skips the tests that need it (for a
	// checkout built without its source) instead of failing them.
	SkipClusterAutoscalerEnv = "SKIP_CLUSTER_AUTOSCALER"
)

// ErrNoClusterAutoscaler is wrapped by FindClusterAutoscaler's error when
// the binary is missing.
var ErrNoClusterAutoscaler = errors.New("the cluster-autoscaler binary is missing")

// FindClusterAutoscaler returns the path of the cluster-autoscaler binary.
// Its error says what is missing and how to get it (ErrNoEnvironment when
// IM_ENV_BIN_DIR is unset).
func FindClusterAutoscaler() (string, error) {
	binDir := os.Getenv(BinDirEnv)
	if binDir == "" {
		return "", ErrNoEnvironment
	}
	path := filepath.Join(binDir, ClusterAutoscalerBinary)
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s does not exist or is not executable. `make tools` builds it from the "+
			"cluster-autoscaler 1.36.1 source tarball named by the Makefile variable CA_SOURCE (it printed "+
			"\"cluster-autoscaler NOT built\" if the tarball was not found): run `make tools CA_SOURCE=<path of "+
			"cluster-autoscaler-1.36.1-aws.tar.gz>` (docs/autoscaling.md, \"Autoscaling\", says how to make it from the upstream "+
			"release tag), or set %s=1 to skip the tests that run it", ErrNoClusterAutoscaler, path, SkipClusterAutoscalerEnv)
	}
	return path, nil
}

// SkipClusterAutoscaler reports whether SKIP_CLUSTER_AUTOSCALER asks to skip
// the tests that run the cluster-autoscaler.
func SkipClusterAutoscaler() bool {
	v := os.Getenv(SkipClusterAutoscalerEnv)
	return v != "" && v != "0" && v != "false"
}

// RequireClusterAutoscaler skips t outside the environment tier or with
// SKIP_CLUSTER_AUTOSCALER=1 (saying so), fails it naming what is missing
// when the binary was not built, and returns the binary's path.
func RequireClusterAutoscaler(t testing.TB) string {
	t.Helper()
	if os.Getenv(BinDirEnv) == "" {
		t.Skip("needs the local environment: run make test")
	}
	if SkipClusterAutoscaler() {
		t.Skipf("skipped: %s is set, so the tests that run the real cluster-autoscaler do not run", SkipClusterAutoscalerEnv)
	}
	path, err := FindClusterAutoscaler()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// AutoscalerOptions configures StartClusterAutoscaler. Durations left zero
// get the fast test timings of the cluster-autoscaler source README.
type AutoscalerOptions struct {
	// ClusterName is the EKS cluster whose groups are discovered by their
	// tags k8s.io/cluster-autoscaler/enabled and
	// k8s.io/cluster-autoscaler/<ClusterName> (the tags instance-manager puts
	// on a group annotated instancemgr.keikoproj.io/cluster-autoscaler-enabled).
	ClusterName string
	// Endpoint is where its AWS clients go: moto (default) or an
	// AWSRecorder's URL in front of it. It must be a loopback address.
	Endpoint string
	// ScanInterval (default 2s), ScaleDownUnneededTime (default 5s),
	// ScaleDownDelayAfterAdd (default 5s), MaxNodeProvisionTime (default 2m).
	ScanInterval, ScaleDownUnneededTime, ScaleDownDelayAfterAdd, MaxNodeProvisionTime time.Duration
	// Expander is --expander (default: the autoscaler's, least-waste).
	Expander string
	// ExtraArgs are appended to the command line (later flags win).
	ExtraArgs []string
}

// ClusterAutoscaler is a running cluster-autoscaler.
type ClusterAutoscaler struct {
	// LogPath is its log (klog, -v=4).
	LogPath string
	// CloudConfig is the path of the cloud-config file it was given.
	CloudConfig string
	// MetricsURL serves /metrics and /health-check.
	MetricsURL string
	// Args is its command line.
	Args []string

	p *process
}

// StartClusterAutoscaler starts the cluster-autoscaler (AWS provider)
// against this environment's apiserver (admin kubeconfig) and moto, and
// waits until its health check answers. It stops with the environment, or
// earlier with Stop.
//
// Its AWS provider ignores AWS_ENDPOINT_URL, so every service it calls
// (autoscaling, ec2, eks) is overridden in a cloud-config file; and as a
// guard, should an endpoint ever not be overridden, it runs with
// HTTPS_PROXY and HTTP_PROXY pointing at a closed loopback port (Go never
// proxies loopback addresses, so moto is still reached directly): nothing
// it sends can leave the machine. It never reads the host's AWS
// configuration (static dummy credentials, metadata service off).
func (e *Environment) StartClusterAutoscaler(ctx context.Context, opts AutoscalerOptions) (*ClusterAutoscaler, error) {
	bin, err := FindClusterAutoscaler()
	if err != nil {
		return nil, err
	}
	if opts.ClusterName == "" {
		return nil, errors.New("StartClusterAutoscaler: AutoscalerOptions.ClusterName is required")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = e.AWSEndpoint
	}
	if opts.Endpoint == "" {
		return nil, errors.New("StartClusterAutoscaler: the environment runs without AWS; start it with Options.AWS or Options.Bridge")
	}
	if !strings.HasPrefix(opts.Endpoint, "http://127.0.0.1:") {
		return nil, fmt.Errorf("StartClusterAutoscaler: endpoint %s is not on 127.0.0.1", opts.Endpoint)
	}
	dur := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return d.String()
	}
	dir, err := os.MkdirTemp(e.Dir, "cluster-autoscaler-")
	if err != nil {
		return nil, err
	}
	cloudConfig := filepath.Join(dir, "cloud-config")
	if err := os.WriteFile(cloudConfig, []byte(AutoscalerCloudConfig(opts.Endpoint, AWSRegion)), 0o644); err != nil {
		return nil, err
	}
	logDir := filepath.Join(e.Dir, "logs")
	var ca *ClusterAutoscaler
	ca, err = startWithRetry(func() (*ClusterAutoscaler, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--cloud-provider=aws",
			"--cloud-config=" + cloudConfig,
			"--aws-use-static-instance-list=true",
			"--kubeconfig=" + e.Kubeconfig,
			"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/" + opts.ClusterName,
			"--leader-elect=false",
			"--address=" + hostPort(port),
			"--scan-interval=" + dur(opts.ScanInterval, 2*time.Second),
			"--scale-down-unneeded-time=" + dur(opts.ScaleDownUnneededTime, 5*time.Second),
			"--scale-down-delay-after-add=" + dur(opts.ScaleDownDelayAfterAdd, 5*time.Second),
			"--scale-down-delay-after-failure=5s",
			"--node-delete-delay-after-taint=1s",
			"--unremovable-node-recheck-timeout=10s",
			"--max-node-provision-time=" + dur(opts.MaxNodeProvisionTime, 2*time.Minute),
			"--skip-nodes-with-local-storage=false",
			"--skip-nodes-with-system-pods=false",
			"--max-graceful-termination-sec=10",
			"--logtostderr=true",
			"--v=4",
		}
		if opts.Expander != "" {
			args = append(args, "--expander="+opts.Expander)
		}
		args = append(args, opts.ExtraArgs...)
		p, err := startProcess(ClusterAutoscalerBinary, bin, args, logDir, autoscalerEnv()...)
		if err != nil {
			return nil, err
		}
		url := "http://" + hostPort(port)
		if err := p.waitReady(ctx, startTimeout, httpCheck(http.DefaultClient, url+"/health-check", "")); err != nil {
			p.stop(time.Second)
			return nil, err
		}
		return &ClusterAutoscaler{LogPath: p.logPath, CloudConfig: cloudConfig, MetricsURL: url, Args: args, p: p}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("start cluster-autoscaler: %w", err)
	}
	e.addProc(ca.p, time.Now())
	return ca, nil
}

// autoscalerEnv is the environment the cluster-autoscaler runs with, on
// top of the test binary's (whose AWS variables it overrides).
func autoscalerEnv() []string {
	return []string{
		"AWS_REGION=" + AWSRegion, "AWS_DEFAULT_REGION=" + AWSRegion,
		"AWS_ACCESS_KEY_ID=" + AWSAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + AWSSecretAccessKey, "AWS_SESSION_TOKEN=",
		"AWS_PROFILE=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
		// The guard: anything not overridden would go to a closed loopback
		// port instead of AWS (Go does not proxy loopback addresses).
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"NO_PROXY=", "no_proxy=",
	}
}

// AutoscalerCloudConfig is the cluster-autoscaler's --cloud-config for an
// AWS endpoint: one ServiceOverride per service its AWS provider calls
// (autoscaling, ec2, eks). Region must equal AWS_REGION, or the override
// is skipped silently.
func AutoscalerCloudConfig(endpoint, region string) string {
	var b strings.Builder
	b.WriteString("[Global]\n")
	for i, svc := range []string{"autoscaling", "ec2", "eks"} {
		fmt.Fprintf(&b, "\n[ServiceOverride %q]\nService = %s\nRegion = %s\nURL = %s\nSigningRegion = %s\n", fmt.Sprint(i+1), svc, region, endpoint, region)
	}
	return b.String()
}

// Stop stops the cluster-autoscaler (SIGTERM, SIGKILL after 5s). Safe to
// call more than once; the environment's Stop calls it too.
func (c *ClusterAutoscaler) Stop() { c.p.stop(5 * time.Second) }

// Log returns its log so far.
func (c *ClusterAutoscaler) Log() string {
	b, _ := os.ReadFile(c.LogPath)
	return string(b)
}

// Running reports whether the process is still running.
func (c *ClusterAutoscaler) Running() bool { return !c.p.hasExited() }
