package harness

import (
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
)

// The end-to-end suites' manager settings that their tests reason about:
// reconcile workers and --drain-timeout.
const (
	SuiteWorkers      = 4
	SuiteDrainTimeout = 15 * time.Second
	// SuiteImagePinPeriod is how often the suite's manager resolves image
	// references again (--image-pin-period).
	SuiteImagePinPeriod = 3 * time.Second
)

// AuditFileEnv names the file an end-to-end suite appends its drain audit
// figure to (make test prints it).
const AuditFileEnv = "IM_E2E_AUDIT"

// Suite is one end-to-end test package's world: the local environment
// (control plane with controller manager, scheduler and kwok kubelets;
// moto; the instance-to-node bridge), the admin's client and Cloud, and
// the manager running in process. A package declares one
// (`var suite = &harness.Suite{Prefix: "e2e"}`) and runs it from TestMain
// (suite.Run); its tests start with suite.Require.
type Suite struct {
	// Prefix names the suite's cloud (Cloud's prefix) and its working
	// directory's variable (IM_<PREFIX>_DIR keeps the environment's files).
	Prefix string
	// CIDR is the cloud's VPC (default 10.0.0.0/16).
	CIDR string

	Env     *env.Environment
	Admin   client.Client
	Cloud   *Cloud
	Manager *Manager

	// replaced is the test whose cleanup puts the suite's manager back
	// (ReplaceManager).
	replaced testing.TB
}

// Run starts the environment, the cloud and the manager, runs the tests,
// stops the manager and audits the whole run (AuditTotal): it returns m's
// exit code, or 1 when setup fails or an instance went with undrained pods
// that no test caught. Without the local environment the tests run and
// skip (Require).
func (s *Suite) Run(m *testing.M) int {
	SetTestLogger()
	cidr := s.CIDR
	if cidr == "" {
		cidr = "10.0.0.0/16"
	}
	w, err := StartWorld(WorldOptions{Name: s.Prefix, Env: env.AllComponents(), CIDR: cidr, CloudPrefix: s.Prefix})
	if errors.Is(err, env.ErrNoEnvironment) {
		fmt.Println("skipping end-to-end tests: needs the local environment (run make test)")
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Stop()
	s.Env, s.Admin, s.Cloud = w.Env, w.Admin, w.Cloud
	e := w.Env
	if s.Manager, err = s.StartManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	if s.Manager != nil {
		_ = s.Manager.Stop()
	}
	if AuditTotal(e.Bridge, os.Stdout, os.Stderr, os.Getenv(AuditFileEnv)) != 0 && code == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: instances went with undrained pods (AUDIT lines above)")
		code = 1
	}
	return code
}

// ManagerOptions are the settings the suite runs the manager with: short
// intervals so rotations progress in seconds; references cloud-checked at
// admission; the sweep every few seconds with a short grace; image
// references (latest, ssm://) resolved again every few seconds.
func (s *Suite) ManagerOptions() app.Options {
	return app.Options{
		AWS: &s.Env.AWS, MaxConcurrentUpgrades: 5, Workers: SuiteWorkers,
		DrainTimeout: SuiteDrainTimeout, PollInterval: time.Second, ResyncInterval: 20 * time.Second,
		CloudChecks: true, GCPeriod: 3 * time.Second, GCGrace: 5 * time.Second, ImagePinPeriod: SuiteImagePinPeriod,
		SpotRecommender: "minion-manager", // the --spot-recommendation-source default
	}
}

// StartManager starts a manager with ManagerOptions (the caller keeps it in
// s.Manager or stops it).
func (s *Suite) StartManager() (*Manager, error) {
	return StartManager(s.Env.Config, s.Env.Envtest.WebhookInstallOptions, s.ManagerOptions())
}

// Require skips t without the local environment, and audits it: t fails if
// an instance went with undrained pods while it ran (Audit).
func (s *Suite) Require(t *testing.T) {
	t.Helper()
	if s.Env == nil {
		t.Skip("needs the local environment: run make test")
	}
	Audit(t, s.Env.Bridge)
}

// ReplaceManager stops the running manager and starts one with opts (from
// ManagerOptions, changed); the suite's own manager is back when the test
// ends. Called again in the same test, it replaces the replacement.
func (s *Suite) ReplaceManager(t testing.TB, opts app.Options) {
	t.Helper()
	s.stopManager(t)
	m, err := StartManager(s.Env.Config, s.Env.Envtest.WebhookInstallOptions, opts)
	if err != nil {
		t.Fatalf("starting a manager with the test's options: %v", err)
	}
	s.Manager = m
	if s.replaced == nil {
		s.replaced = t
		t.Cleanup(func() {
			s.replaced = nil
			s.stopManager(t)
			m, err := s.StartManager()
			if err != nil {
				t.Fatalf("starting the suite's manager again: %v", err)
			}
			s.Manager = m
		})
	}
}

func (s *Suite) stopManager(t testing.TB) {
	t.Helper()
	if s.Manager == nil {
		return
	}
	if err := s.Manager.Stop(); err != nil {
		t.Errorf("stopping the manager: %v", err)
	}
	s.Manager = nil
}

// SetTestLogger sets controller-runtime's logger for a test package:
// errors and warnings (V 2), everything with IM_TEST_VERBOSE set.
func SetTestLogger() {
	level := zapcore.Level(2)
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = -1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
}
