// Package autoscaling runs instance-manager beside the real Kubernetes
// cluster-autoscaler (AWS provider, built by make tools into bin/) in the
// local environment: control plane with scheduler, kwok kubelets, moto as
// AWS and the instance-to-node bridge. The autoscaler discovers the groups
// by the tags instance-manager puts on them and scales them through moto;
// the tests check that it scales the right group within its bounds, from
// zero with the node template tags, scales empty nodes in, and that a
// rollout and the autoscaler do not fight over desired capacity.
//
// Each test starts its own autoscaler after its groups exist, so that it
// discovers them at once (its AWS provider re-lists groups only every 60s).
package autoscaling

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

const cluster = "ca-cluster"

// cloudPollPeriod is the manager's --cloud-poll-period here (see run).
const cloudPollPeriod = 30 * time.Second

// priorityConfigMap is the ConfigMap the autoscaler's priority expander
// reads in its namespace (kube-system), which the manager keeps.
const priorityConfigMap = "cluster-autoscaler-priority-expander"

var (
	environment *env.Environment
	admin       client.Client
	cloud       *harness.Cloud
	manager     *harness.Manager
	// controllerCalls records every AWS call instance-manager makes.
	controllerCalls *env.AWSRecorder
	// skipReason is why the environment was not started (the autoscaler
	// binary missing, SKIP_CLUSTER_AUTOSCALER): each test reports it.
	skipReason error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	harness.SetTestLogger()
	if os.Getenv(env.BinDirEnv) == "" {
		fmt.Println("skipping the autoscaler tests: they need the local environment (run make test)")
		return m.Run()
	}
	if env.SkipClusterAutoscaler() {
		fmt.Printf("skipping the autoscaler tests: %s is set\n", env.SkipClusterAutoscalerEnv)
		return m.Run()
	}
	if _, err := env.FindClusterAutoscaler(); err != nil {
		// Every test fails with this message (requireAutoscaler).
		skipReason = err
		return m.Run()
	}
	opts := env.AllComponents()
	// Instances take a few seconds to become nodes, as they boot: long
	// enough for the autoscaler and a rollout to overlap.
	opts.JoinDelay = 3 * time.Second
	w, err := harness.StartWorld(harness.WorldOptions{Name: "autoscaling", Env: opts, CIDR: "10.1.0.0/16", CloudPrefix: "ca"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Stop()
	environment, admin, cloud = w.Env, w.Admin, w.Cloud
	e := w.Env
	if controllerCalls, err = e.NewAWSRecorder("instance-manager"); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	awsCfg := controllerCalls.Config(e.AWS)
	manager, err = harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{
		AWS: &awsCfg, MaxConcurrentUpgrades: 5, Workers: 4,
		DrainTimeout: 30 * time.Second, PollInterval: time.Second, ResyncInterval: 10 * time.Second,
		GCPeriod: time.Hour, GCGrace: time.Hour,
		// The autoscaler's terminations wait in the drain hook until a
		// listing shows them (a settled group accepts one up to twice this
		// old); 30 s keeps that under a minute here, where the 2-minute
		// default made TestSurgeRotationWhileTheAutoscalerScalesIn wait past
		// its 4 minutes on a loaded machine.
		CloudPollPeriod:             cloudPollPeriod,
		AutoscalerPriorityConfigMap: "kube-system/" + priorityConfigMap,
	})
	if err == nil {
		err = harness.SetBoundaries(context.Background(), admin, cloud.Boundaries(cloud.AMIs[0], 5))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	_ = manager.Stop()
	return code
}

// requireAutoscaler skips or fails t when the autoscaler cannot run.
func requireAutoscaler(t *testing.T) {
	t.Helper()
	env.RequireClusterAutoscaler(t)
	if skipReason != nil {
		t.Fatal(skipReason)
	}
	if environment == nil {
		t.Fatal("the local environment did not start (see the output before the tests)")
	}
	// The autoscaler's scale-ins pass the groups' termination hook too:
	// none may take a pod with it.
	harness.Audit(t, environment.Bridge)
}
