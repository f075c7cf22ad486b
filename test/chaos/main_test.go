// Package chaos runs instance-manager end to end while things go wrong: AWS
// throttles, fails and resets connections (test/faults between the SDK and
// moto), the manager is killed, the webhooks are down, input is hostile.
// Each test prints its figures as lines "FIGURE <name> <value>" so `make
// chaos` output and docs/reliability.md can quote them.
//
// The suite runs only when IM_CHAOS is set (`make chaos`, which `make test`
// calls after the other tiers), so that its load does not share the machine
// with the integration and end-to-end packages `go test ./...` runs in
// parallel.
package chaos

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// EnableEnv turns the suite on.
const EnableEnv = "IM_CHAOS"

var (
	environment *env.Environment
	admin       client.Client
	cloud       *harness.Cloud
	// seed chooses every random decision of the suite (faults, kill
	// points); IM_CHAOS_SEED replays a run.
	seed int64
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv(EnableEnv) == "" {
		fmt.Println("skipping chaos tests: set " + EnableEnv + "=1 (make chaos)")
		return m.Run()
	}
	seed = time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("IM_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "IM_CHAOS_SEED:", err)
			return 1
		}
		seed = v
	}
	fmt.Printf("chaos seed %d (replay with IM_CHAOS_SEED=%d make chaos)\n", seed, seed)
	harness.SetTestLogger()
	w, err := harness.StartWorld(harness.WorldOptions{Name: "chaos", Env: env.AllComponents(), CIDR: "10.0.0.0/16", CloudPrefix: "chaos"})
	if errors.Is(err, env.ErrNoEnvironment) {
		fmt.Println("skipping chaos tests: needs the local environment (run make chaos)")
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Stop()
	environment, admin, cloud = w.Env, w.Admin, w.Cloud
	code := m.Run()
	if harness.AuditTotal(environment.Bridge, os.Stdout, os.Stderr, "") != 0 && code == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: instances went with undrained pods (AUDIT lines above)")
		code = 1
	}
	return code
}

// requireEnv skips t without the local environment and IM_CHAOS, and
// audits it: t fails if an instance went with undrained pods while it ran
// (harness.Audit), crashes, faults and leader changes included.
func requireEnv(t *testing.T) {
	t.Helper()
	if environment == nil {
		t.Skip("needs the local environment and " + EnableEnv + "=1: run make chaos")
	}
	harness.Audit(t, environment.Bridge)
}

// figure prints one measured figure in the form docs/reliability.md quotes.
func figure(t *testing.T, name string, value any) {
	t.Helper()
	fmt.Printf("FIGURE %s %v\n", name, value)
}
