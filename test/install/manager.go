package install

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/build/image"
	"github.com/instancemgr/instance-manager/test/env"
)

// ManagerOptions are what the caller decides about the replica; everything
// else comes from the release's Deployment and the image.
type ManagerOptions struct {
	// Image is the OCI image layout to run (what `make image` writes);
	// default $IM_IMAGE_LAYOUT, which `make test` and `make demo` set.
	Image string
	// Dir is the replica's pod: the image's file system for this machine's
	// architecture is unpacked into Dir/rootfs (replaced), and the files
	// the kubelet would mount are written into it. Required; created if
	// missing.
	Dir string
	// ExtraArgs are appended to the Deployment's arguments.
	ExtraArgs []string
	// ReadyTimeout bounds the wait for the replica to be ready. Default 3m.
	ReadyTimeout time.Duration
	// LogWriter, when set, receives the process's standard output and
	// error (the manager's log, one entry per line, at the level the
	// Deployment's --zap-log-level sets).
	LogWriter io.Writer
}

// Manager is one replica of the release's Deployment, running the image's
// entrypoint in a process of its own.
type Manager struct {
	// Options are the manager's options as its flags parse them: the
	// Deployment's arguments followed by the local addresses.
	Options app.Options
	// Args are the arguments the entrypoint runs with.
	Args []string
	// Rootfs is the unpacked image the process is chrooted into.
	Rootfs string
	// Image is the image's config (entrypoint, user, labels).
	Image *v1.ConfigFile
	// User is the name the API server authenticates the replica as:
	// system:serviceaccount:<namespace>:<serviceaccount>.
	User string
	// Config authenticates as the ServiceAccount (its token, refreshed in
	// TokenFile like a projected token); use it to check what the replica
	// may do.
	Config *rest.Config
	// TokenFile and CertDir are the projected files, as seen from outside
	// the chroot.
	TokenFile, CertDir string
	// WebhookAddr, HealthAddr and MetricsAddr are host:port on 127.0.0.1
	// of the webhook server (TLS), /healthz and /readyz, and /metrics.
	WebhookAddr, HealthAddr, MetricsAddr string

	namespace string // the release's: POD_NAMESPACE
	cmd       *exec.Cmd
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	done      chan struct{}
	err       error
	tail      *tailBuffer
}

// Done is closed when the process has exited (by Stop or on its own).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err returns why the process exited (nil while it runs or after a clean
// Stop).
func (m *Manager) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// Pid is the process id of the running entrypoint.
func (m *Manager) Pid() int { return m.cmd.Process.Pid }

// stopGrace is how long Stop waits after SIGTERM before SIGKILL; the
// chart's pods have Kubernetes' default 30s grace period.
const stopGrace = 30 * time.Second

// Stop sends SIGTERM, as the kubelet does, waits for the process (SIGKILL
// after 30s) and the kubelet's part, and returns the process's error: a
// non-zero exit, with the end of its log. The Lease is released on the
// way out.
func (m *Manager) Stop() error {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(stopGrace):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	m.cancel()
	m.wg.Wait()
	return m.err
}

// tokenLifetime is the lifetime of the ServiceAccount tokens requested; a
// new one is written at half of it, as the kubelet refreshes projected
// tokens before they expire.
const tokenLifetime = time.Hour

// ImageLayoutEnv names the OCI layout of the image the replicas run.
const ImageLayoutEnv = "IM_IMAGE_LAYOUT"

// serviceAccountDir is where the kubelet mounts the ServiceAccount's token,
// the cluster CA and the namespace, which client-go's in-cluster
// configuration reads.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// StartManager runs the image's entrypoint the way one replica of the
// release's Deployment runs in a pod, and returns once the replica is
// ready: webhook certificate issued and injected, /readyz OK, leader
// elected, and the API server reaching the webhooks.
//
//   - The container: the image for this machine's architecture, unpacked
//     into opts.Dir/rootfs; its entrypoint runs chrooted there as the
//     image's numeric user (65532:65532), with the image's environment. A
//     broken image (no entrypoint, wrong architecture, a binary that needs
//     a shell or a library) fails here.
//   - Arguments: the Deployment's manager container arguments, then the
//     local addresses (--webhook-host=127.0.0.1 and free ports for the
//     webhook, probe and metrics servers), then opts.ExtraArgs.
//   - Environment: the container's, with the downward API's values
//     (POD_NAMESPACE, SERVICE_ACCOUNT_NAME); KUBERNETES_SERVICE_HOST and
//     _PORT pointing at the API server; moto's endpoint, region and
//     credentials as AWS_* variables.
//   - Identity: in-cluster configuration, as in a pod: a token of the
//     Deployment's ServiceAccount from the TokenRequest API, the API
//     server's CA and the namespace in /var/run/secrets/kubernetes.io/
//     serviceaccount of the rootfs, owned by the image's user; a goroutine
//     renews the token. The API server applies exactly the chart's RBAC.
//   - The kubelet's part: a goroutine copies the certificate Secret the
//     rotator fills (--webhook-secret-name) into the rootfs at
//     --webhook-cert-dir whenever it changes, as the Secret volume would.
//   - Webhook traffic: with --cert-rotation the rotator's certificate is
//     for <webhook Service>.<namespace>.svc (and .cluster.local) only:
//     cert-controller writes DNS names, never IP addresses, into it, and a
//     client verifies an IP address only against IP addresses, so a
//     clientConfig url of https://127.0.0.1:<port> cannot verify. Instead
//     the webhook configurations keep their Service reference and the
//     Service becomes an ExternalName Service for 127.0.0.1, and each
//     webhook's clientConfig.service.port becomes the replica's webhook
//     port. For an ExternalName Service the API server dials
//     <externalName>:<clientConfig port> and still verifies the
//     certificate for <service>.<namespace>.svc with the caBundle the
//     rotator injected, as it would verify a pod behind the Service.
//
// Errors: no image layout, a Deployment this cannot run (no manager
// container, an environment variable from elsewhere than the downward API
// or a literal, arguments the binary's flags reject), the API calls
// failing, the process failing to start or exiting, or the replica not
// ready within opts.ReadyTimeout (what it was waiting for is named, with
// the end of the process's log).
func StartManager(ctx context.Context, e *env.Environment, rel *Release, opts ManagerOptions) (*Manager, error) {
	if opts.Dir == "" {
		return nil, errors.New("StartManager: ManagerOptions.Dir is required")
	}
	if opts.Image == "" {
		opts.Image = os.Getenv(ImageLayoutEnv)
	}
	if opts.Image == "" {
		return nil, fmt.Errorf("StartManager: no image: ManagerOptions.Image and $%s are empty; run make image (make test and make demo set %s)", ImageLayoutEnv, ImageLayoutEnv)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	admin, err := adminClient(e.Config)
	if err != nil {
		return nil, err
	}
	m := &Manager{done: make(chan struct{}), Rootfs: filepath.Join(opts.Dir, "rootfs"), tail: &tailBuffer{}, namespace: rel.Deployment.Namespace}
	if m.Image, err = unpackImage(opts.Image, m.Rootfs); err != nil {
		return nil, err
	}
	uid, gid, err := imageUser(m.Image)
	if err != nil {
		return nil, err
	}

	// The pod: arguments, environment, ServiceAccount.
	pod := rel.Deployment.Spec.Template.Spec
	container, err := rel.ManagerContainer()
	if err != nil {
		return nil, err
	}
	namespace, sa := rel.Deployment.Namespace, pod.ServiceAccountName
	m.User = "system:serviceaccount:" + namespace + ":" + sa
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	m.WebhookAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	m.HealthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	m.MetricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
	m.Args = append(append(slices.Clone(container.Args),
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(ports[0]),
		"--health-probe-bind-address="+m.HealthAddr, "--metrics-bind-address="+m.MetricsAddr),
		opts.ExtraArgs...)
	fs := flag.NewFlagSet("instance-manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m.Options.BindFlags(fs)
	(&zap.Options{}).BindFlags(fs)
	fs.Bool("version", false, "")
	if err := fs.Parse(m.Args); err != nil {
		return nil, fmt.Errorf("the manager rejects the arguments %q: %w", m.Args, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("the manager would ignore the arguments %q", fs.Args())
	}
	environ, err := podEnv(e, container, namespace, sa)
	if err != nil {
		return nil, err
	}

	// The kubelet's volumes, inside the rootfs.
	saDir := filepath.Join(m.Rootfs, serviceAccountDir)
	m.TokenFile = filepath.Join(saDir, "token")
	m.CertDir = filepath.Join(m.Rootfs, m.Options.WebhookCertDir)
	owner := fileOwner{uid: uid, gid: gid}
	for _, d := range []string{saDir, m.CertDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeToken(ctx, admin, namespace, sa, m.TokenFile, owner); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"ca.crt": e.Config.CAData, "namespace": []byte(namespace)} {
		if err := owner.write(filepath.Join(saDir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	m.Config = rest.AnonymousClientConfig(e.Config)
	m.Config.BearerTokenFile = m.TokenFile

	if m.Options.CertRotation {
		if err := routeWebhooks(ctx, admin, namespace, m.Options, ports[0]); err != nil {
			return nil, err
		}
	}

	m.cmd, err = image.Command(m.Rootfs, m.Image, environ, m.Args...)
	if err != nil {
		return nil, err
	}
	var out io.Writer = m.tail
	if opts.LogWriter != nil {
		out = io.MultiWriter(m.tail, opts.LogWriter)
	}
	m.cmd.Stdout, m.cmd.Stderr = out, out
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s in %s as %s: %w", m.Image.Config.Entrypoint[0], m.Rootfs, m.Image.Config.User, err)
	}
	go func() {
		defer close(m.done)
		if err := m.cmd.Wait(); err != nil {
			m.err = fmt.Errorf("%s: %w; the end of its log:\n%s", m.Image.Config.Entrypoint[0], err, m.tail.String())
		}
	}()
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		renewToken(runCtx, admin, namespace, sa, m.TokenFile, owner)
	}()
	if m.Options.CertRotation {
		secret := types.NamespacedName{Namespace: namespace, Name: m.Options.WebhookSecretName}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			projectSecret(runCtx, admin, secret, m.CertDir, owner)
		}()
	}

	if err := m.waitReady(ctx, admin, opts.ReadyTimeout); err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("%w; the end of the manager's log:\n%s", err, m.tail.String())
	}
	return m, nil
}

// unpackImage unpacks the image of this machine's architecture from the
// OCI layout dir into rootfs (replacing it) and returns its config.
func unpackImage(dir, rootfs string) (*v1.ConfigFile, error) {
	idx, err := image.ReadLayout(dir)
	if err != nil {
		return nil, err
	}
	img, err := image.PlatformImage(idx, v1.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dir, err)
	}
	if err := os.RemoveAll(rootfs); err != nil {
		return nil, err
	}
	cf, err := image.Unpack(img, rootfs)
	if err != nil {
		return nil, fmt.Errorf("unpacking image %s into %s: %w", dir, rootfs, err)
	}
	return cf, nil
}

// imageUser returns the numeric uid and gid the image runs as, which own
// the files the kubelet mounts. Errors: a user that is not uid:gid.
func imageUser(cf *v1.ConfigFile) (uid, gid int, err error) {
	if _, err := fmt.Sscanf(cf.Config.User, "%d:%d", &uid, &gid); err != nil {
		return 0, 0, fmt.Errorf("the image's user %q is not numeric uid:gid: %w", cf.Config.User, err)
	}
	return uid, gid, nil
}

// podEnv is the container's environment in the pod: the API server's
// in-cluster address, moto as AWS, then the container's own variables with
// the downward API's values resolved.
func podEnv(e *env.Environment, c corev1.Container, namespace, sa string) ([]string, error) {
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("the API server address %q: %w", e.Config.Host, err)
	}
	out := []string{
		"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port(),
		"AWS_ENDPOINT_URL=" + e.AWSEndpoint, "AWS_REGION=" + env.AWSRegion,
		"AWS_ACCESS_KEY_ID=" + env.AWSAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + env.AWSSecretAccessKey,
	}
	for _, v := range c.Env {
		value := v.Value
		switch {
		case v.ValueFrom == nil:
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			value = namespace
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "spec.serviceAccountName":
			value = sa
		default:
			return nil, fmt.Errorf("environment variable %s of the manager container comes from %+v, which this replica cannot provide", v.Name, v.ValueFrom)
		}
		out = append(out, v.Name+"="+value)
	}
	return out, nil
}

// waitReady waits for /readyz, the leader election (the Lease held) and
// a round trip from the API server to the validating webhook (a
// server-side dry-run update of the boundary ConfigMap, which the
// ConfigMap webhook answers).
func (m *Manager) waitReady(ctx context.Context, admin kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	step := func(what string, check func() error) error {
		var last error
		for {
			if last = check(); last == nil {
				return nil
			}
			select {
			case <-m.done:
				return fmt.Errorf("the manager exited while waiting for %s: %v", what, m.err)
			case <-ctx.Done():
				return fmt.Errorf("timed out after %s waiting for %s: %v", timeout, what, last)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	if err := step("/readyz (webhook certificate issued, projected and injected)", func() error { return probe(m.HealthAddr, "/readyz") }); err != nil {
		return err
	}
	if m.Options.LeaderElect {
		ns := m.Options.LeaderElectionNamespace
		if ns == "" {
			ns = m.namespace // the binary's default: POD_NAMESPACE
		}
		if err := step("the leader election (Lease "+m.Options.LeaderElectionID+")", func() error {
			lease, err := admin.CoordinationV1().Leases(ns).Get(ctx, m.Options.LeaderElectionID, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
				return errors.New("the Lease has no holder")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return step("the API server to reach the ConfigMap webhook", func() error {
		cm, err := admin.CoreV1().ConfigMaps(m.Options.ConfigNamespace).Get(ctx, app.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting the boundary ConfigMap %s/%s: %w", m.Options.ConfigNamespace, app.ConfigMapName, err)
		}
		_, err = admin.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
}
