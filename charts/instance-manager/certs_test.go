package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
)

// TestCertRotation installs the default rendering (self-managed
// certificates) into the local control plane and runs the manager in
// process, as the chart's ServiceAccount and with the chart's arguments, the
// way one replica runs in its pod. The test plays the kubelet: it projects
// the certificate Secret into the cert directory. It checks that:
//   - the rotator fills the Secret the chart created,
//   - the replica is not ready and presents no certificate before the files
//     are there,
//   - then it becomes ready, both webhook configurations carry the CA, and
//     the webhook server presents a certificate for the webhook Service's
//     DNS name that this CA verifies,
//   - every informer of the manager syncs under the chart's RBAC.
func TestCertRotation(t *testing.T) {
	tool(t, "helm")
	e := env.Start(t, env.Options{CRDDirectoryPaths: []string{filepath.Join(chartDir, "crds")}})
	logs := &testWriter{t: t}
	t.Cleanup(logs.close) // runs last: after the manager has stopped
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	admin := kubernetes.NewForConfigOrDie(e.Config)

	const ns = "im-certs"
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := render(t, release{Namespace: ns})
	applyManifest(t, e, r.manifest)

	// What the pod gets from the chart: its arguments, and from the
	// downward API its namespace and ServiceAccount.
	opts := managerFlags(t, r)
	if !opts.CertRotation {
		t.Fatal("the default rendering does not pass --cert-rotation")
	}
	sa := r.one(t, "ServiceAccount").GetName()
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("SERVICE_ACCOUNT_NAME", sa)
	// As the chart's awsRegion would; no AWS call is made without
	// InstanceGroups.
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// Out of the pod: local directories and ports. Leader election stays
	// off because out of cluster controller-runtime cannot infer the
	// Lease's namespace; the rotator does not depend on it (it runs on
	// every replica).
	certDir := t.TempDir()
	opts.WebhookCertDir = certDir
	opts.WebhookHost = "127.0.0.1"
	opts.WebhookPort = freePort(t)
	opts.MetricsBindAddress = "0"
	healthAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	opts.HealthProbeBindAddress = healthAddr
	opts.LeaderElect = false

	mgr, err := app.NewManager(serviceAccountConfig(t, e, ns, sa), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
	}

	// The rotator fills the Secret the chart created empty.
	var secret *corev1.Secret
	eventually(t, time.Minute, "the rotator to fill the Secret", func() bool {
		running()
		s, err := admin.CoreV1().Secrets(ns).Get(ctx, opts.WebhookSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secret = s
		return len(s.Data["ca.crt"]) > 0 && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0
	})

	// Before the kubelet projects it, the replica is alive but not ready,
	// and the webhook server completes no handshake.
	eventually(t, 30*time.Second, "/healthz to answer", func() bool { return probe(healthAddr, "/healthz") == http.StatusOK })
	if code := probe(healthAddr, "/readyz"); code == http.StatusOK {
		t.Error("/readyz is OK before the certificate files exist")
	}
	webhookAddr := net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort))
	if conn, err := tls.Dial("tcp", webhookAddr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		_ = conn.Close()
		t.Error("the webhook server presents a certificate before the rotated one is in place")
	}

	// Play the kubelet: project the Secret into the cert directory.
	for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, key), secret.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, "/readyz to be OK", func() bool {
		running()
		return probe(healthAddr, "/readyz") == http.StatusOK
	})

	// The CA is in every webhook of both configurations, and it is the one
	// in the Secret now (the rotator did not replace it meanwhile).
	secret, err = admin.CoreV1().Secrets(ns).Get(ctx, opts.WebhookSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	mutating, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, opts.MutatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range mutating.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			t.Errorf("mutating webhook %s: caBundle is not the rotated CA", w.Name)
		}
	}
	validating, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ValidatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range validating.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			t.Errorf("validating webhook %s: caBundle is not the rotated CA", w.Name)
		}
	}

	// The API server calls <service>.<namespace>.svc and verifies with the
	// caBundle: so does this handshake.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("ca.crt holds no PEM certificate")
	}
	serverName := fmt.Sprintf("%s.%s.svc", webhookService(t, r).Name, ns)
	conn, err := tls.Dial("tcp", webhookAddr, &tls.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		t.Fatalf("TLS handshake with the webhook server as %s: %v", serverName, err)
	}
	_ = conn.Close()

	// Every informer the manager started syncs: the chart grants what the
	// manager's controllers and webhooks read.
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Error("the manager's cache did not sync under the chart's RBAC")
	}
	running()
}

// eventually polls cond every 200ms until it is true, failing t after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probe returns the HTTP status of GET http://addr/path, or 0 when the
// request fails.
func probe(addr, path string) int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// freePort returns a TCP port free on 127.0.0.1 at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// testWriter sends the manager's log to the test's log until close (a
// goroutine of the manager logging after the test would panic).
type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
