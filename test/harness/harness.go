// Package harness runs instance-manager in process against a local
// environment (test/env): the CRD and webhook configurations installed in
// the control plane, the manager serving the webhooks and running the
// controllers as the controller's service account. The integration and
// end-to-end suites and the demo use it.
package harness

import (
	"context"

	"fmt"
	"path/filepath"
	"runtime"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/webhooks"
)

// ControllerUser is who the in-process manager acts as (impersonated);
// only it may change the provenance annotations.
const ControllerUser = "system:serviceaccount:instance-manager:instance-manager"

// ConfigNamespace holds the boundary ConfigMap.
const ConfigNamespace = "instance-manager"

// RepoRoot is the root of the instance-manager checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CRDPath is the directory of the generated CRDs.
func CRDPath() string { return filepath.Join(RepoRoot(), "config", "crd") }

// ExamplesPath is the path of examples/name: the seed manifests.
func ExamplesPath(name string) string {
	return filepath.Join(RepoRoot(), "examples", name)
}

// WebhookOptions installs instance-manager's webhook configurations; the
// environment points them at a local serving address.
func WebhookOptions() envtest.WebhookInstallOptions {
	mutating, validating := webhooks.Configurations(webhooks.ClientConfig{
		Service: &types.NamespacedName{Namespace: ConfigNamespace, Name: "instance-manager-webhook"}, Port: 443,
	}, types.NamespacedName{Namespace: ConfigNamespace, Name: app.ConfigMapName})
	return envtest.WebhookInstallOptions{
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validating},
	}
}

// Manager is a running in-process instance-manager.
type Manager struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// EnsureConfigNamespace creates the config namespace if missing.
func EnsureConfigNamespace(ctx context.Context, admin client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConfigNamespace}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// StartManager starts the manager with admin (system:masters) credentials
// impersonating ControllerUser, serving the webhooks where the environment
// expects them (wio from env.Environment.Envtest.WebhookInstallOptions),
// and returns once the webhook server answers. opts fills in everything
// else (AWS config, intervals); its webhook, metrics and identity settings
// are overwritten.
func StartManager(adminConfig *rest.Config, wio envtest.WebhookInstallOptions, opts app.Options) (*Manager, error) {
	cfg := rest.CopyConfig(adminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ControllerUser, Groups: []string{"system:masters", "system:authenticated"}}
	opts.ConfigNamespace = ConfigNamespace
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.WebhookHost, opts.WebhookPort, opts.WebhookCertDir = wio.LocalServingHost, wio.LocalServingPort, wio.LocalServingCertDir
	opts.ControllerUsername = ControllerUser
	opts.InProcessRestarts = true
	mgr, err := app.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cancel: cancel, done: make(chan struct{})}
	go func() {
		m.err = mgr.Start(ctx)
		close(m.done)
	}()
	const startTimeout = 3 * time.Minute // a loaded 2-core machine starts slowly
	deadline := time.After(startTimeout)
	for {
		select {
		case <-m.done:
			return nil, fmt.Errorf("manager stopped: %v", m.err)
		case <-deadline:
			cancel()
			return nil, fmt.Errorf("the webhook server did not start within %s", startTimeout)
		case <-time.After(200 * time.Millisecond):
		}
		if mgr.GetWebhookServer().StartedChecker()(nil) == nil {
			return m, nil
		}
	}
}

// Stop stops the manager and waits until it has stopped (as a crash of the
// controller would, minus the cleanup: nothing it did is undone).
func (m *Manager) Stop() error {
	m.cancel()
	<-m.done
	return m.err
}
