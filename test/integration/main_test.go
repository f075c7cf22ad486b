// Package integration runs the policy layer through the real API server:
// the CRD and webhook configurations installed in the local control plane,
// the instance-manager manager in process, and requests made as tenants
// limited by RBAC to their namespace (impersonation).
package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/webhooks"
)

// controllerUser is who the in-process manager acts as; only it may change
// the provenance annotations.
const controllerUser = "system:serviceaccount:instance-manager:instance-manager"

var (
	environment *env.Environment
	admin       client.Client // system:masters
	repoRoot    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))

	mutating, validating := webhooks.Configurations(webhooks.ClientConfig{
		Service: &types.NamespacedName{Namespace: "instance-manager", Name: "instance-manager-webhook"}, Port: 443,
	}, types.NamespacedName{Namespace: "instance-manager", Name: app.ConfigMapName})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := env.New(ctx, env.Options{
		CRDDirectoryPaths: []string{filepath.Join(repoRoot, "config", "crd")},
		AWS:               true, // the InstanceGroup controller runs too; its clusters do not exist
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{mutating}, ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validating},
		},
	})
	cancel()
	if errors.Is(err, env.ErrNoEnvironment) {
		fmt.Println("skipping integration tests: needs the local environment (run make test)")
		return m.Run() // every test skips through requireEnv
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "local environment:", err)
		return 1
	}
	environment = e
	defer func() { _ = e.Stop() }()

	admin, err = client.New(e.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "instance-manager"}}
	if err := admin.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgrCtx, stop := context.WithCancel(context.Background())
	done, err := startManager(mgrCtx, e)
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	stop()
	<-done // the manager stops before the control plane does
	return code
}

// startManager starts the manager and returns once its webhook server
// answers; done is closed when the manager has stopped.
func startManager(ctx context.Context, e *env.Environment) (done <-chan struct{}, err error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser, Groups: []string{"system:masters", "system:authenticated"}}
	wio := e.Envtest.WebhookInstallOptions
	mgr, err := app.NewManager(cfg, app.Options{
		ConfigNamespace: "instance-manager", MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		WebhookHost: wio.LocalServingHost, WebhookPort: wio.LocalServingPort, WebhookCertDir: wio.LocalServingCertDir,
		ControllerUsername: controllerUser, AWS: &e.AWS,
	})
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	stopped := make(chan struct{})
	go func() { errc <- mgr.Start(ctx); close(stopped) }()
	// Wait until the webhook server answers and the boundaries are loaded.
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-errc:
			return nil, fmt.Errorf("manager stopped: %v", err)
		case <-deadline:
			return nil, errors.New("the webhook server did not start within 60s")
		case <-time.After(200 * time.Millisecond):
		}
		if mgr.GetWebhookServer().StartedChecker()(nil) == nil {
			return stopped, nil
		}
	}
}

func zapLevel() zapcore.Level {
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		return -1
	}
	return 2 // errors only
}

func requireEnv(t *testing.T) {
	t.Helper()
	if environment == nil {
		t.Skip("needs the local environment: run make test")
	}
}
