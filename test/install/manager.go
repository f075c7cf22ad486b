package install

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
)

// ManagerOptions are what the caller decides about the in-process replica;
// everything else comes from the release's Deployment.
type ManagerOptions struct {
	// AWS is the AWS configuration of the manager's provisioners (the
	// environment's moto). Required.
	AWS *aws.Config
	// Dir receives the files the kubelet would project into the pod: the
	// ServiceAccount token (Dir/token) and the webhook certificate
	// (Dir/serving-certs). Required; created if missing.
	Dir string
	// Adjust, when set, is called with the options parsed from the
	// Deployment's arguments before the manager is built.
	Adjust func(*app.Options)
	// ReadyTimeout bounds the wait for the replica to be ready. Default 3m.
	ReadyTimeout time.Duration
	// LogWriter, when set, receives controller-runtime's log (the
	// process-wide logger is replaced), at the level the Deployment's zap
	// flags set, one line per entry in zap's console format; and, until
	// Stop, the standard library's log (the webhook server's TLS handshake
	// errors while its certificate is not there yet).
	LogWriter io.Writer
}

// Manager is the manager running in process as a replica of the release.
type Manager struct {
	// Options are the manager's options: the Deployment's arguments, with
	// local addresses and directories in place of the pod's.
	Options app.Options
	// Logging are the zap flags among the Deployment's arguments (e.g.
	// --zap-log-level), used with ManagerOptions.LogWriter.
	Logging zap.Options
	// User is the name the API server authenticates the replica as:
	// system:serviceaccount:<namespace>:<serviceaccount>.
	User string
	// Config authenticates as the ServiceAccount (its token, refreshed in
	// TokenFile like a projected token); use it to check what the replica
	// may do.
	Config *rest.Config
	// TokenFile and CertDir are the projected files.
	TokenFile, CertDir string
	// WebhookAddr, HealthAddr and MetricsAddr are host:port on 127.0.0.1
	// of the webhook server (TLS), /healthz and /readyz, and /metrics.
	WebhookAddr, HealthAddr, MetricsAddr string

	cancel     context.CancelFunc
	wg         sync.WaitGroup
	done       chan struct{}
	err        error
	restoreLog func()
}

// Done is closed when the manager has stopped (by Stop or on its own).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err returns why the manager stopped (nil while it runs or after a clean
// Stop).
func (m *Manager) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// Stop stops the manager and the kubelet's part and waits for them; it
// returns the manager's error. The Lease is released on the way out.
func (m *Manager) Stop() error {
	m.cancel()
	m.wg.Wait()
	<-m.done
	if m.restoreLog != nil {
		m.restoreLog()
	}
	return m.err
}

// tokenLifetime is the lifetime of the ServiceAccount tokens requested; a
// new one is written at half of it, as the kubelet refreshes projected
// tokens before they expire.
const tokenLifetime = time.Hour

// StartManager runs the release's manager in this process the way one
// replica of its Deployment runs in a pod, and returns once the replica is
// ready: webhook certificate issued and injected, /readyz OK, leader
// elected, and the API server reaching the webhooks.
//
//   - Arguments: the Deployment's manager container arguments, parsed with
//     the binary's flags; then the pod's addresses and directories are
//     replaced by free ports on 127.0.0.1 and opts.Dir, and opts.Adjust is
//     applied.
//   - Environment: the container's, with the downward API's values
//     (POD_NAMESPACE, SERVICE_ACCOUNT_NAME), is set in this process
//     (os.Setenv), so one replica runs per process at a time.
//   - Identity: a token of the Deployment's ServiceAccount from the
//     TokenRequest API, in a file the client re-reads and a goroutine
//     renews; the API server applies exactly the chart's RBAC.
//   - The kubelet's part: a goroutine copies the certificate Secret the
//     rotator fills (--webhook-secret-name) into the cert directory
//     whenever it changes, as the Secret volume would.
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
// The rotator registers a controller name that must be unique in the
// process (it ignores the manager's SkipNameValidation), so a process can
// build one manager with --cert-rotation only.
//
// Errors: a Deployment this cannot run (no manager container, an
// environment variable from elsewhere than the downward API or a literal,
// unparseable arguments), the API calls failing, the manager failing to
// start, or the replica not ready within opts.ReadyTimeout (what it was
// waiting for is named).
func StartManager(ctx context.Context, e *env.Environment, rel *Release, opts ManagerOptions) (*Manager, error) {
	if opts.AWS == nil || opts.Dir == "" {
		return nil, errors.New("StartManager: ManagerOptions.AWS and ManagerOptions.Dir are required")
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	admin, err := adminClient(e.Config)
	if err != nil {
		return nil, err
	}
	m := &Manager{done: make(chan struct{}), TokenFile: filepath.Join(opts.Dir, "token"), CertDir: filepath.Join(opts.Dir, "serving-certs")}
	if err := os.MkdirAll(m.CertDir, 0o700); err != nil {
		return nil, err
	}

	// The pod: arguments, environment, ServiceAccount.
	pod := rel.Deployment.Spec.Template.Spec
	container, err := rel.ManagerContainer()
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("instance-manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m.Options.BindFlags(fs)
	m.Logging.BindFlags(fs)
	if err := fs.Parse(container.Args); err != nil {
		return nil, fmt.Errorf("the manager rejects the Deployment's arguments %q: %w", container.Args, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("the manager would ignore the Deployment's arguments %q", fs.Args())
	}
	namespace, sa := rel.Deployment.Namespace, pod.ServiceAccountName
	for _, v := range container.Env {
		value := v.Value
		switch {
		case v.ValueFrom == nil:
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			value = namespace
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "spec.serviceAccountName":
			value = sa
		default:
			return nil, fmt.Errorf("environment variable %s of the manager container comes from %+v, which this out-of-cluster replica cannot provide", v.Name, v.ValueFrom)
		}
		if err := os.Setenv(v.Name, value); err != nil {
			return nil, err
		}
	}
	m.User = "system:serviceaccount:" + namespace + ":" + sa

	// The pod's network and volumes, here.
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	m.Options.WebhookHost, m.Options.WebhookPort, m.Options.WebhookCertDir = "127.0.0.1", ports[0], m.CertDir
	m.HealthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	m.MetricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
	m.WebhookAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	m.Options.HealthProbeBindAddress, m.Options.MetricsBindAddress = m.HealthAddr, m.MetricsAddr
	m.Options.AWS = opts.AWS
	if opts.Adjust != nil {
		opts.Adjust(&m.Options)
	}

	if err := writeToken(ctx, admin, namespace, sa, m.TokenFile); err != nil {
		return nil, err
	}
	m.Config = rest.AnonymousClientConfig(e.Config)
	m.Config.BearerTokenFile = m.TokenFile

	if m.Options.CertRotation {
		if err := routeWebhooks(ctx, admin, namespace, m.Options, ports[0]); err != nil {
			return nil, err
		}
	}

	if opts.LogWriter != nil {
		ctrl.SetLogger(zap.New(zap.UseFlagOptions(&m.Logging), zap.WriteTo(opts.LogWriter), zap.ConsoleEncoder()))
		previous := log.Writer()
		log.SetOutput(opts.LogWriter)
		m.restoreLog = func() { log.SetOutput(previous) }
	}
	mgr, err := app.NewManager(m.Config, m.Options)
	if err != nil {
		if m.restoreLog != nil {
			m.restoreLog()
		}
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		m.err = mgr.Start(runCtx)
	}()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		renewToken(runCtx, admin, namespace, sa, m.TokenFile)
	}()
	if m.Options.CertRotation {
		secret := types.NamespacedName{Namespace: namespace, Name: m.Options.WebhookSecretName}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			projectSecret(runCtx, admin, secret, m.CertDir)
		}()
	}

	if err := m.waitReady(ctx, admin, mgr, opts.ReadyTimeout); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// waitReady waits for /readyz, the leader election and a round trip from
// the API server to the validating webhook (a server-side dry-run update of
// the boundary ConfigMap, which the ConfigMap webhook answers).
func (m *Manager) waitReady(ctx context.Context, admin kubernetes.Interface, mgr ctrl.Manager, timeout time.Duration) error {
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
				return fmt.Errorf("the manager stopped while waiting for %s: %v", what, m.err)
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
		if err := step("the leader election", func() error {
			select {
			case <-mgr.Elected():
				return nil
			default:
				return errors.New("not elected yet")
			}
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

// probe returns nil when GET http://addr/path answers 200.
func probe(addr, path string) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 at the time of
// the call.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// writeToken writes a fresh token of the ServiceAccount namespace/name to
// path (atomically: the client may be reading it).
func writeToken(ctx context.Context, admin kubernetes.Interface, namespace, name, path string) error {
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return writeFileAtomically(path, []byte(tr.Status.Token))
}

// renewToken writes a new token every half lifetime until ctx ends (the
// client re-reads the file; errors are retried a minute later).
func renewToken(ctx context.Context, admin kubernetes.Interface, namespace, name, path string) {
	wait := tokenLifetime / 2
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = tokenLifetime / 2
		if err := writeToken(ctx, admin, namespace, name, path); err != nil && ctx.Err() == nil {
			ctrl.Log.WithName("install").Error(err, "renewing the ServiceAccount token; retrying in a minute")
			wait = time.Minute
		}
	}
}

// projectSecret copies the keys of the Secret into dir, each as a file,
// whenever they change, until ctx ends: the kubelet's Secret volume.
func projectSecret(ctx context.Context, admin kubernetes.Interface, key types.NamespacedName, dir string) {
	written := map[string][]byte{}
	for {
		s, err := admin.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err == nil {
			for name, data := range s.Data {
				if len(data) == 0 || bytes.Equal(written[name], data) {
					continue
				}
				if err := writeFileAtomically(filepath.Join(dir, name), data); err != nil {
					ctrl.Log.WithName("install").Error(err, "projecting the webhook certificate Secret", "key", name)
					continue
				}
				written[name] = data
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func writeFileAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// routeWebhooks points the release's webhooks at the replica: the webhook
// Service becomes an ExternalName Service for 127.0.0.1 and every webhook
// referring to it calls port port.
func routeWebhooks(ctx context.Context, admin kubernetes.Interface, namespace string, opts app.Options, port int) error {
	patch := []byte(`{"spec":{"type":"ExternalName","externalName":"127.0.0.1","clusterIP":null,"clusterIPs":null,"ipFamilies":null,"ipFamilyPolicy":null}}`)
	if _, err := admin.CoreV1().Services(namespace).Patch(ctx, opts.WebhookServiceName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("making the webhook Service %s/%s an ExternalName Service for 127.0.0.1: %w", namespace, opts.WebhookServiceName, err)
	}
	ours := func(s *admissionregistrationv1.ServiceReference) bool {
		return s != nil && s.Namespace == namespace && s.Name == opts.WebhookServiceName
	}
	mutating, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, opts.MutatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", opts.MutatingWebhookConfiguration, err)
	}
	n := 0
	for i := range mutating.Webhooks {
		if s := mutating.Webhooks[i].ClientConfig.Service; ours(s) {
			s.Port = ptr.To(int32(port))
			n++
		}
	}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mutating, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pointing MutatingWebhookConfiguration %s at port %d: %w", mutating.Name, port, err)
	}
	validating, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ValidatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", opts.ValidatingWebhookConfiguration, err)
	}
	for i := range validating.Webhooks {
		if s := validating.Webhooks[i].ClientConfig.Service; ours(s) {
			s.Port = ptr.To(int32(port))
			n++
		}
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, validating, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pointing ValidatingWebhookConfiguration %s at port %d: %w", validating.Name, port, err)
	}
	if n == 0 {
		return fmt.Errorf("no webhook of %s or %s calls Service %s/%s", opts.MutatingWebhookConfiguration, opts.ValidatingWebhookConfiguration, namespace, opts.WebhookServiceName)
	}
	return nil
}
