package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// BenchmarkStepFleet is one step of a rollout over 2,000 groups of 5
// nodes in 200 namespaces (a canary wave by namespace, 25%, the rest),
// with the canary started: what the leader computes at each group change
// and idle wake-up, the plan of the waves not started included.
func BenchmarkStepFleet(b *testing.B) {
	c, err := boundaries.Parse(map[string]string{"rollout": "soak: 5m\nwaves:\n- {name: canary, namespaces: [team-0, team-1]}\n- {name: early, percent: 25}\n"})
	if err != nil {
		b.Fatal(err)
	}
	var groups []Group
	for i := range 2000 {
		ns := fmt.Sprintf("team-%d", i%200)
		groups = append(groups, Group{Key: fmt.Sprintf("%s/g-%d", ns, i), Namespace: ns, Running: "old", Generation: 1, ObservedGeneration: 1,
			State: v1alpha1.StateReady, Ready: true, NodesUpdated: 5, NodesTotal: 5, Nodes: 5, InService: 5, ReadyNodes: 5, NodesReady: true})
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := Step(nil, Input{Now: now, Revision: "old", Policy: c.Rollout, Groups: groups}).Record
	rec = Step(rec, Input{Now: now, Revision: "new", Policy: c.Rollout, Groups: groups}).Record
	if rec.Phase != record.PhaseProgressing || rec.Wave != 0 {
		b.Fatalf("setup: phase %s wave %d", rec.Phase, rec.Wave)
	}
	in := Input{Now: now.Add(time.Minute), Revision: "new", Policy: c.Rollout, Groups: groups}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		Step(rec, in)
	}
}
