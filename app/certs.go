package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Self-managed webhook certificates (--cert-rotation). The chart uses them
// unless it is told to use cert-manager.
//
// How it works, on every replica:
//   - the cert-controller rotator keeps a CA and a serving certificate for
//     <webhook-service>.<POD_NAMESPACE>.svc in the Secret --webhook-secret-name
//     (which the chart creates empty), renews them before they expire, and
//     writes the CA into the caBundle of the two webhook configurations;
//   - the kubelet projects that Secret into --webhook-cert-dir;
//   - the webhook server listens at once but presents no certificate (every
//     TLS handshake fails) until the rotator reports ready: certificate files
//     present and CA injected. Then it serves the files, reloading them when
//     the kubelet updates them.
//
// /readyz fails until then, so no replica gets webhook traffic before it can
// answer it with a certificate the API server trusts.

// Names inside the certificate Secret and the cert directory.
const (
	certFileName   = "tls.crt"
	keyFileName    = "tls.key"
	caName         = "instance-manager-ca"
	caOrganization = "instance-manager"
)

// setupCertRotation adds the certificate rotator to mgr when
// opts.CertRotation is set; otherwise it does nothing (the certificates in
// --webhook-cert-dir come from elsewhere, e.g. cert-manager). The Secret and
// the Service are in POD_NAMESPACE. Errors: POD_NAMESPACE unset, a webhook
// server that is not controller-runtime's DefaultServer, or registering
// with the manager failing.
func setupCertRotation(mgr ctrl.Manager, opts Options) error {
	if !opts.CertRotation {
		return nil
	}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		return errors.New("--cert-rotation needs POD_NAMESPACE (the namespace of the webhook Service and Secret; set it from the downward API)")
	}
	for _, f := range []struct{ flag, value string }{
		{"--webhook-service-name", opts.WebhookServiceName},
		{"--webhook-secret-name", opts.WebhookSecretName},
		{"--mutating-webhook-configuration", opts.MutatingWebhookConfiguration},
		{"--validating-webhook-configuration", opts.ValidatingWebhookConfiguration},
	} {
		if f.value == "" {
			return fmt.Errorf("--cert-rotation needs %s", f.flag)
		}
	}
	server, ok := mgr.GetWebhookServer().(*webhook.DefaultServer)
	if !ok {
		return fmt.Errorf("--cert-rotation: the webhook server is a %T, not a *webhook.DefaultServer", mgr.GetWebhookServer())
	}

	ready := make(chan struct{})
	serviceDNS := opts.WebhookServiceName + "." + namespace + ".svc"
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: namespace, Name: opts.WebhookSecretName},
		CertDir:        opts.WebhookCertDir,
		CertName:       certFileName,
		KeyName:        keyFileName,
		CAName:         caName,
		CAOrganization: caOrganization,
		DNSName:        serviceDNS,
		ExtraDNSNames:  []string{serviceDNS + ".cluster.local"},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: opts.MutatingWebhookConfiguration, Type: rotator.Mutating},
			{Name: opts.ValidatingWebhookConfiguration, Type: rotator.Validating},
		},
		FieldOwner: "instance-manager",
		// Every replica serves webhooks, so every replica needs the
		// certificate files and the ready signal, not only the leader
		// (with true, IsReady never closes on the other replicas). The
		// replicas may race to fill the Secret at first start; the loser's
		// update conflicts and it adopts the winner's certificate.
		RequireLeaderElection: false,
		// The server reloads renewed files itself; no restart needed.
		RestartOnSecretRefresh: false,
	})
	if err != nil {
		return fmt.Errorf("setting up webhook certificate rotation: %w", err)
	}

	cert := &deferredCertificate{
		certPath: filepath.Join(opts.WebhookCertDir, certFileName),
		keyPath:  filepath.Join(opts.WebhookCertDir, keyFileName),
		ready:    ready,
	}
	if err := mgr.Add(cert); err != nil {
		return err
	}
	// The server builds its TLS config when it starts: with GetCertificate
	// set it does not read the (not yet existing) files itself.
	server.Options.TLSOpts = append(server.Options.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = cert.GetCertificate
	})
	return mgr.AddReadyzCheck("webhook-certificates", func(*http.Request) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("webhook certificates are not ready: waiting for the rotator to write them, the kubelet to project them and the CA to be injected")
		}
	})
}

// deferredCertificate is the webhook server's certificate source under
// rotation: nothing until ready is closed, then the files in the cert
// directory, watched for renewals. It runs on every replica.
type deferredCertificate struct {
	certPath, keyPath string
	ready             <-chan struct{}
	watcher           atomic.Pointer[certwatcher.CertWatcher]
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (d *deferredCertificate) NeedLeaderElection() bool { return false }

// Start waits for the rotator, then loads and watches the files until ctx
// ends. Errors: the files cannot be loaded once the rotator said they were
// there.
func (d *deferredCertificate) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-d.ready:
	}
	w, err := certwatcher.New(d.certPath, d.keyPath)
	if err != nil {
		return fmt.Errorf("loading the rotated webhook certificate: %w", err)
	}
	d.watcher.Store(w)
	return w.Start(ctx)
}

// GetCertificate is the server's tls.Config.GetCertificate.
func (d *deferredCertificate) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := d.watcher.Load()
	if w == nil {
		return nil, errors.New("the webhook serving certificate is not ready yet")
	}
	return w.GetCertificate(hello)
}
