// Package integration runs the policy layer through the real API server:
// the CRD and webhook configurations installed in the local control plane,
// the instance-manager manager in process, and requests made as tenants
// limited by RBAC to their namespace (impersonation).
package integration

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/webhooks"
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
	harness.SetTestLogger()
	// The InstanceGroup controller runs too (AWS); its clusters do not exist.
	w, err := harness.StartWorld(harness.WorldOptions{Name: "integration", Env: env.Options{AWS: true}})
	if errors.Is(err, env.ErrNoEnvironment) {
		fmt.Println("skipping integration tests: needs the local environment (run make test)")
		return m.Run() // every test skips through requireEnv
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Stop()
	environment, admin = w.Env, w.Admin
	e := w.Env
	mgr, err := harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{AWS: &e.AWS, LeastPrivilege: app.LeastPrivilege{
		ClusterName: lpHomeCluster, AdditionalClusterNames: lpAdditionalClusters, IAMPermissionsBoundary: lpBoundary, // leastprivilege_test.go
	},
		// The local API server calls the webhooks from 127.0.0.1; any
		// other address is a caller the NetworkPolicy keeps out on a real
		// cluster (webhookport_test.go).
		WebhookAllowedSources: []string{apiServerSource},
		// A per-source bound far below the default (200 per second,
		// more than the local API server sends at all), which a local
		// flood exhausts at once: the API server's own address, which
		// carries every user's admissions, must never be bound (N28,
		// admissionflood_test.go); the users and namespaces are, at the
		// chart's defaults.
		WebhookRatePerSource: 20,
		WebhookRatePerUser:   webhooks.DefaultUserRate, WebhookRatePerNamespace: webhooks.DefaultNamespaceRate,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	_ = mgr.Stop() // the manager stops before the control plane does
	return code
}

func requireEnv(t *testing.T) {
	t.Helper()
	if environment == nil {
		t.Skip("needs the local environment: run make test")
	}
}
