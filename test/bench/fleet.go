package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/instancemgr/instance-manager/app"
)

// The fleet rollout's inputs. The durations AWS and Kubernetes contribute
// are published or measured figures (docs/performance.md, the fleet
// row):
//   - BENCH_FLEET_DRAIN 30s: the pods' grace period, Kubernetes' default
//     terminationGracePeriodSeconds (kubernetes.io, "Pod Lifecycle",
//     termination of Pods); an evicted pod takes up to it to stop.
//   - BENCH_FLEET_LAUNCH 30s: from an instance's launch until it runs and
//     answers, measured for Amazon Linux on c5.xlarge by ec2-boot-bench
//     (C. Percival, "EC2 boot time benchmarking", daemonology.net, 2021:
//     RunInstances 1.5 s, pending to running 4.9 s, running to SSH open
//     about 23 s).
//   - BENCH_FLEET_JOIN 65s: from then until its Node is Ready, the EKS
//     node startup measured over about 1,000 nodes before tuning (J.
//     Ludvik, Outreach, "Faster EKS Node and Pod Startup", KubeFM, 2026:
//     65 s, 45 s after).
//   - BENCH_FLEET_TERMINATE 30s: an assumption (no published figure):
//     from TerminateInstanceInAutoScalingGroup until Auto Scaling
//     launches the replacement.
//
// So one node's replacement takes about 2.6 minutes, within the 2 to 3
// minutes usually quoted for an EC2 launch and EKS node join.
var (
	rolloutGroups  = envInt("BENCH_FLEET_ROLLOUT_GROUPS", 2000)
	rolloutNodes   = envInt("BENCH_FLEET_ROLLOUT_NODES", 5)
	fleetDrain     = envDuration("BENCH_FLEET_DRAIN", 30*time.Second)
	fleetLaunch    = envDuration("BENCH_FLEET_LAUNCH", 30*time.Second)
	fleetJoin      = envDuration("BENCH_FLEET_JOIN", 65*time.Second)
	fleetTerminate = envDuration("BENCH_FLEET_TERMINATE", 30*time.Second)
	// fleetCaps are the caps measured besides the default (comma-separated).
	fleetCaps = envString("BENCH_FLEET_CAPS", "50,200")
)

// fleetPolicy is the rollout of the fleet figure: a canary namespace (10
// groups), 10% of the rest, then the rest, each soaking 30 minutes.
const fleetPolicy = "soak: 30m\nwaves:\n- {name: canary, namespaces: [team-0]}\n- {name: early, percent: 10}\n"

// benchFleetRollout reports nodes replaced per hour for a rollout of a new
// default image to rolloutGroups groups of rolloutNodes nodes (maxUnavailable
// 1) in 200 namespaces, at the default maxConcurrentUpgrades (the
// manager's --max-concurrent-upgrades) and at fleetCaps, simulated on a
// virtual clock over the product's own decisions (fleetWorld); then the
// simulations' wall-clock and CPU time.
func benchFleetRollout(report func(string, float64, string)) error {
	var opts app.Options
	opts.BindFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	caps := []int{opts.MaxConcurrentUpgrades}
	for _, f := range strings.Split(fleetCaps, ",") {
		if c, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && c > 0 && c != caps[0] {
			caps = append(caps, c)
		}
	}
	in := fleetInputs{Groups: rolloutGroups, NodesPerGroup: rolloutNodes, Namespaces: 200, MaxUnavailable: 1, Policy: fleetPolicy,
		Drain: fleetDrain, Terminate: fleetTerminate, Launch: fleetLaunch, Join: fleetJoin,
		Fanout: 35600 * time.Millisecond / 2000, React: time.Second, RolloutEvery: time.Minute, Limit: 90 * 24 * time.Hour}
	fmt.Printf("  (fleet rollout: %d groups of %d nodes, maxUnavailable 1; per node: drain %s, termination %s, launch to InService %s, to a Ready node %s; "+
		"fan-out %s a group, reconcile %s after its own write, rollout step at most every %s; policy %q)\n",
		in.Groups, in.NodesPerGroup, in.Drain, in.Terminate, in.Launch, in.Join, in.Fanout, in.React, in.RolloutEvery, in.Policy)
	wall, cpu := time.Now(), processCPU()
	for i, c := range caps {
		in.Cap = c
		ctx := context.Background()
		w, err := newFleetWorld(ctx, in)
		if err != nil {
			return err
		}
		started := time.Now()
		res, err := w.run(ctx)
		if err != nil {
			return fmt.Errorf("maxConcurrentUpgrades %d: %w", c, err)
		}
		if i == 0 {
			report("fleet_nodes_replaced_per_hour", res.PerHour(), "nodes/h")
			report("fleet_rollout_hours", res.Elapsed.Hours(), "h")
		} else {
			report(fmt.Sprintf("fleet_nodes_replaced_per_hour_cap%d", c), res.PerHour(), "nodes/h")
			report(fmt.Sprintf("fleet_rollout_hours_cap%d", c), res.Elapsed.Hours(), "h")
		}
		fmt.Printf("  (maxConcurrentUpgrades %d: %d nodes replaced in %s; %s; %d reconciles, %d rollout steps, %s of wall-clock)\n",
			c, res.Replaced, res.Elapsed.Round(time.Minute), res.describe(), res.Passes, res.Steps, time.Since(started).Round(100*time.Millisecond))
	}
	report("fleet_bench_seconds", time.Since(wall).Seconds(), "s")
	report("fleet_bench_cpu_seconds", (processCPU() - cpu).Seconds(), "s")
	return nil
}

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
