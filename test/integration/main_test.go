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
	admin       client.Client // system:masters
	repoRoot    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repoRoot = harness.RepoRoot()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a loaded machine starts the environment slowly
	e, err := env.New(ctx, env.Options{
		CRDDirectoryPaths:     []string{harness.CRDPath()},
		WebhookInstallOptions: harness.WebhookOptions(),
		AWS:                   true, // the InstanceGroup controller runs too; its clusters do not exist
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
	if err == nil {
		err = harness.EnsureConfigNamespace(context.Background(), admin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{AWS: &e.AWS, LeastPrivilege: app.LeastPrivilege{
		ClusterName: lpHomeCluster, AdditionalClusterNames: lpAdditionalClusters, IAMPermissionsBoundary: lpBoundary, // leastprivilege_test.go
	},
		// The local API server calls the webhooks from 127.0.0.1; any
		// other address is a caller the NetworkPolicy keeps out on a real
		// cluster (webhookport_test.go).
		WebhookAllowedSources: []string{apiServerSource},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	_ = mgr.Stop() // the manager stops before the control plane does
	return code
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
