package main

import (
	"context"
	"testing"
	"time"
)

// The fleet simulation's accounting: the virtual time a rollout takes is
// what the rolling update's batches, the slot cap and the modelled
// durations add up to. Each node's replacement here is a 30 s drain, 30 s
// of termination, 30 s to InService and 30 s to a Ready node: 2 minutes,
// with no reconcile delay, no fan-out delay and a rollout step at every
// change, so the figures are exact.
func TestFleetSimulationAccounting(t *testing.T) {
	cases := []struct {
		name                         string
		groups, nodes, unavail, cap_ int
		policy                       string
		want                         time.Duration
	}{
		// 5 batches of 1 node, 2 minutes each.
		{"one group, maxUnavailable 1", 1, 5, 1, 5, "waves:\n- {name: all, soak: 0s}\n", 10 * time.Minute},
		// One batch of 5 nodes.
		{"one group, maxUnavailable 5", 1, 5, 5, 5, "waves:\n- {name: all, soak: 0s}\n", 2 * time.Minute},
		// One slot: the second group rotates after the first, which gives
		// its slot back once its last old instance is gone (9 minutes),
		// before its last replacement is a Ready node.
		{"two groups, one slot", 2, 5, 1, 1, "waves:\n- {name: all, soak: 0s}\n", 19 * time.Minute},
		// Two slots: both at once.
		{"two groups, two slots", 2, 5, 1, 2, "waves:\n- {name: all, soak: 0s}\n", 10 * time.Minute},
		// A canary wave (namespace team-0: group 0) soaks 15 minutes
		// before the rest (group 1) starts.
		{"canary and soak", 2, 5, 1, 5, "soak: 15m\nwaves:\n- {name: canary, namespaces: [team-0]}\n", 10*time.Minute + 15*time.Minute + 10*time.Minute + 15*time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fleetInputs{Groups: tc.groups, NodesPerGroup: tc.nodes, Namespaces: 2, MaxUnavailable: tc.unavail, Cap: tc.cap_, Policy: tc.policy,
				Drain: 30 * time.Second, Terminate: 30 * time.Second, Launch: 30 * time.Second, Join: 30 * time.Second, Limit: 24 * time.Hour}
			ctx := context.Background()
			w, err := newFleetWorld(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := w.run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Elapsed != tc.want {
				t.Errorf("the rollout took %s of virtual time, want %s (waves: %s)", res.Elapsed, tc.want, res.describe())
			}
			if want := tc.groups * tc.nodes; res.Replaced != want {
				t.Errorf("%d node(s) replaced, want %d", res.Replaced, want)
			}
			if got, want := res.PerHour(), float64(tc.groups*tc.nodes)/tc.want.Hours(); got != want {
				t.Errorf("%.1f nodes replaced per hour, want %.1f", got, want)
			}
		})
	}
}
