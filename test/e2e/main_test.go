// Package e2e runs instance-manager end to end: the local control plane with
// controller manager, scheduler and kwok kubelets, moto as AWS, the
// instance-to-node bridge, and the manager in process. It creates, scales,
// rotates (with drains and PodDisruptionBudgets), fans out boundary
// changes and deletes InstanceGroups, and checks AWS for leaks.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

var (
	environment *env.Environment
	admin       client.Client
	cloud       *fixture
	manager     *harness.Manager
)

// The suite manager's reconcile workers and drain timeout, which tests
// reason about.
const (
	suiteWorkers      = 4
	suiteDrainTimeout = 15 * time.Second
)

// managerOptions are the settings the suite runs the manager with: short
// intervals so rotations progress in seconds.
func managerOptions() app.Options {
	return app.Options{
		AWS: &environment.AWS, MaxConcurrentUpgrades: 5, Workers: suiteWorkers,
		DrainTimeout: suiteDrainTimeout, PollInterval: time.Second, ResyncInterval: 20 * time.Second,
		// Ownership: references are cloud-checked at admission; the sweep
		// runs every few seconds with a short grace so its test is fast.
		CloudChecks: true, GCPeriod: 3 * time.Second, GCGrace: 5 * time.Second,
		SpotRecommender: "minion-manager", // the --spot-recommendation-source default
	}
}

// auditFileEnv names the file the suite writes its drain audit figure to
// (make test prints it).
const auditFileEnv = "IM_E2E_AUDIT"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	level := zapcore.Level(2)
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = -1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a loaded machine starts the environment slowly
	opts := env.AllComponents()
	opts.CRDDirectoryPaths = []string{harness.CRDPath()}
	opts.WebhookInstallOptions = harness.WebhookOptions()
	opts.Dir = os.Getenv("IM_E2E_DIR")
	e, err := env.New(ctx, opts)
	cancel()
	if errors.Is(err, env.ErrNoEnvironment) {
		fmt.Println("skipping end-to-end tests: needs the local environment (run make test)")
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "local environment:", err)
		return 1
	}
	environment = e
	defer func() { _ = e.Stop() }()
	if admin, err = client.New(e.Config, client.Options{Scheme: app.Scheme()}); err == nil {
		err = harness.EnsureConfigNamespace(context.Background(), admin)
	}
	if err == nil {
		cloud, err = newFixture(context.Background(), e.AWS)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	if manager, err = startManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	_ = manager.Stop()
	if harness.AuditTotal(environment.Bridge, os.Stdout, os.Stderr, os.Getenv(auditFileEnv)) != 0 && code == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: instances went with undrained pods (AUDIT lines above)")
		code = 1
	}
	return code
}

func startManager() (*harness.Manager, error) {
	return harness.StartManager(environment.Config, environment.Envtest.WebhookInstallOptions, managerOptions())
}

// requireEnv skips t without the local environment, and audits it: t
// fails if an instance went with undrained pods while it ran
// (harness.Audit).
func requireEnv(t *testing.T) {
	t.Helper()
	if environment == nil {
		t.Skip("needs the local environment: run make test")
	}
	harness.Audit(t, environment.Bridge)
}
