package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

func TestJudgePods(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	read := start.Add(10 * time.Minute)
	both := boundaries.FailureCriteria{PodNotReadyAfter: 3 * time.Minute, MaxContainerRestarts: 5, LimitRestarts: true}
	pod := func(tweak func(*Pod)) Pod {
		p := Pod{Key: "team/app-1", Node: "new-1", NodeCreated: start.Add(time.Minute), Owner: OwnerDeployment, Ready: true, Container: "app", ReadAt: read}
		tweak(&p)
		return p
	}
	notReady := func(since time.Duration) func(*Pod) {
		return func(p *Pod) { p.Ready, p.NotReadySince = false, read.Add(-since) }
	}
	for _, tc := range []struct {
		name    string
		f       boundaries.FailureCriteria
		pods    []Pod
		clock   time.Time
		want    string // failures: key criterion why; ...
		waiting int
		due     time.Time
	}{
		{name: "ready and never restarted", f: both, pods: []Pod{pod(func(*Pod) {})}},
		{name: "not ready past the limit", f: both, pods: []Pod{pod(notReady(4 * time.Minute))},
			want: "team/app-1 pods_not_ready not Ready for 4m0s (podNotReadyAfter 3m0s)"},
		{name: "not ready within the limit waits", f: both, pods: []Pod{pod(notReady(time.Minute))},
			waiting: 1, due: read.Add(2 * time.Minute)},
		{name: "restarted above the limit", f: both, pods: []Pod{pod(func(p *Pod) { p.Restarts = 6 })},
			want: "team/app-1 container_restarts container app restarted 6 times (maxContainerRestarts 5)"},
		{name: "restarted at the limit", f: both, pods: []Pod{pod(func(p *Pod) { p.Restarts = 5 })}},
		{name: "crash loop: both named, restarts first", f: both, pods: []Pod{pod(func(p *Pod) { notReady(5 * time.Minute)(p); p.Restarts = 7 })},
			want: "team/app-1 container_restarts container app restarted 7 times (maxContainerRestarts 5), not Ready for 5m0s (podNotReadyAfter 3m0s)"},
		{name: "statefulset counts", f: both, pods: []Pod{pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.Owner = OwnerStatefulSet })},
			want: "team/app-1 pods_not_ready not Ready for 4m0s (podNotReadyAfter 3m0s)"},
		{name: "other owners do not count", f: both, pods: []Pod{
			pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.Owner = "ReplicaSet" }),
			pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.Owner = "DaemonSet" }),
			pod(func(p *Pod) { p.Restarts = 9; p.Owner = "" }),
		}},
		{name: "old nodes do not count", f: both, pods: []Pod{pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.NodeCreated = start.Add(-time.Hour) })}},
		{name: "the clock starts at the move or resume", f: both, clock: read.Add(-2 * time.Minute), pods: []Pod{pod(notReady(time.Hour))},
			waiting: 1, due: read.Add(time.Minute)},
		{name: "criteria off", f: boundaries.FailureCriteria{}, pods: []Pod{pod(func(p *Pod) { notReady(time.Hour)(p); p.Restarts = 99 })}},
		{name: "no restarts allowed", f: boundaries.FailureCriteria{LimitRestarts: true}, pods: []Pod{pod(func(p *Pod) { p.Restarts = 1 })},
			want: "team/app-1 container_restarts container app restarted 1 times (maxContainerRestarts 0)"},
		{name: "sorted by key", f: both, pods: []Pod{
			pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.Key = "team/b" }),
			pod(func(p *Pod) { notReady(4 * time.Minute)(p); p.Key = "team/a" }),
		}, want: "team/a pods_not_ready not Ready for 4m0s (podNotReadyAfter 3m0s); team/b pods_not_ready not Ready for 4m0s (podNotReadyAfter 3m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, waiting, due := judgePods(tc.pods, tc.f, start, tc.clock)
			var got []string
			for _, f := range failed {
				got = append(got, f.Pod+" "+f.Criterion+" "+f.Why)
			}
			if strings.Join(got, "; ") != tc.want || waiting != tc.waiting || !due.Equal(tc.due) {
				t.Errorf("judgePods = %q, waiting %d, due %s; want %q, %d, %s", strings.Join(got, "; "), waiting, due, tc.want, tc.waiting, tc.due)
			}
		})
	}
}

func TestHaltPodsIsBounded(t *testing.T) {
	byGroup := map[string][]PodFailure{}
	for i := range 12 {
		g := fmt.Sprintf("ns/g%d", i%2)
		byGroup[g] = append(byGroup[g], PodFailure{Pod: fmt.Sprintf("ns/p%02d", i), Node: fmt.Sprintf("n%d", i%3), Why: "not Ready"})
	}
	h := &record.Halt{Groups: []string{"ns/g0", "ns/g1"}}
	haltPods(h, byGroup)
	if len(h.Pods) != record.MaxHaltPods || h.PodsCount != 12 || h.Pods[0].Group != "ns/g0" || h.Pods[6].Group != "ns/g1" {
		t.Fatalf("halt pods %+v, count %d; want the first %d in group order and 12 in all", h.Pods, h.PodsCount, record.MaxHaltPods)
	}
	if strings.Join(h.Nodes, ",") != "n0,n2,n1" {
		t.Errorf("nodes %v, want each node of the named pods once", h.Nodes)
	}
	reason := podsReason(byGroup["ns/g0"])
	if !strings.HasPrefix(reason, "6 pod(s) of Deployments/StatefulSets on its new nodes failed: ns/p00 on node n0: not Ready; ") || !strings.HasSuffix(reason, "; and 1 more") {
		t.Errorf("reason %q: want 5 pods named and the count of the rest", reason)
	}
}

const workloadPolicy = `
soak: 1m
failure: {startupTimeout: 5m, podNotReadyAfter: 3m, maxContainerRestarts: 5}
waves:
- {name: canary, namespaces: [canary]}
`

// A canary whose nodes are Ready but whose tenant pods are not halts the
// rollout, naming the pods and their nodes; pods on its old nodes and
// pods of other owners do not count; a pod that recovers before
// podNotReadyAfter does not fail the wave, but the wave waits for it.
func TestCanaryWithFailingPodsHalts(t *testing.T) {
	s := newSim(t, policy(t, workloadPolicy))
	s.step("")
	started := s.rec.Waves[0].StartedAt.Time
	s.now = s.now.Add(time.Minute)
	s.converge("canary/a")
	canary := s.group("canary/a")
	bad := func(key, node string, created time.Time, owner string) Pod {
		return Pod{Key: key, Node: node, NodeCreated: created, Owner: owner, NotReadySince: s.now, Container: "app"}
	}
	newNode := started.Add(30 * time.Second)
	canary.Pods = []Pod{
		bad("canary/web-1", "new-1", newNode, OwnerDeployment),
		bad("canary/old-1", "old-1", started.Add(-time.Hour), OwnerDeployment), // an old node
		bad("canary/job-1", "new-1", newNode, "Job"),                           // another owner
		bad("canary/db-0", "new-2", newNode, OwnerStatefulSet),
	}
	read := func() {
		for i := range canary.Pods {
			canary.Pods[i].ReadAt = s.now
		}
	}
	read()
	res := s.step("")
	if s.rec.Phase != record.PhaseProgressing || s.rec.Waves[0].Groups[0].State != record.GroupRotating || s.rec.Waves[0].HealthyAt != nil {
		t.Fatalf("pods not Ready for 0s: %s, canary %+v; want it waiting for them, not soaking", s.rec.Phase, s.rec.Waves[0].Groups[0])
	}
	if res.After != 3*time.Minute {
		t.Errorf("wakes after %s, want when the pods' podNotReadyAfter ends (3m)", res.After)
	}

	// web-1 recovers before the limit; db-0 does not.
	s.now = s.now.Add(2 * time.Minute)
	canary.Pods[0].Ready = true
	read()
	s.step("")
	s.now = s.now.Add(90 * time.Second)
	read()
	s.step("")
	if s.rec.Phase != record.PhaseHalted {
		t.Fatalf("db-0 not Ready for 3m30s: phase %s, want Halted", s.rec.Phase)
	}
	h := s.rec.Halt
	if h.Criterion != record.CriterionPodsNotReady || h.PodsCount != 1 || len(h.Pods) != 1 ||
		h.Pods[0] != (record.FailedPod{Pod: "canary/db-0", Node: "new-2", Group: "canary/a", Why: "not Ready for 3m30s (podNotReadyAfter 3m0s)"}) ||
		strings.Join(h.Nodes, ",") != "new-2" {
		t.Fatalf("halt %+v; want canary/db-0 on new-2 named, only it", h)
	}
	var halted, failed string
	for _, n := range s.notes {
		switch n.Reason {
		case ReasonHalted:
			halted = n.Message
		case ReasonGroupFailed:
			failed = n.Message
		}
	}
	for _, msg := range []string{halted, failed} {
		if !strings.Contains(msg, "canary/db-0 on node new-2: not Ready for 3m30s") || strings.Contains(msg, "web-1") || strings.Contains(msg, "old-1") || strings.Contains(msg, "job-1") {
			t.Errorf("event %q: want db-0 and its node named, no other pod", msg)
		}
	}
	if s.group("team-b/b").AtTarget {
		t.Error("team-b/b moved although the canary failed")
	}

	// Resume gives the pods a fresh clock; a crash loop fails on restarts.
	s.step(record.ActionResume)
	if s.rec.Phase != record.PhaseProgressing {
		t.Fatalf("resume: phase %s", s.rec.Phase)
	}
	canary.Pods[3].Restarts = 6
	s.now = s.now.Add(time.Second)
	read()
	s.step("")
	if s.rec.Phase != record.PhaseHalted || s.rec.Halt.Criterion != record.CriterionContainerRestarts ||
		!strings.Contains(s.rec.Halt.Reason, "canary/db-0 on node new-2: container app restarted 6 times (maxContainerRestarts 5)") {
		t.Fatalf("after resume with 6 restarts: %s, halt %+v; want a container_restarts halt naming db-0", s.rec.Phase, s.rec.Halt)
	}
}

// Pods that all recover let the canary soak and the rollout go on.
func TestCanaryWhosePodsRecoverCompletes(t *testing.T) {
	s := newSim(t, policy(t, workloadPolicy))
	s.step("")
	s.converge("canary/a")
	canary := s.group("canary/a")
	canary.Pods = []Pod{{Key: "canary/web-1", Node: "new-1", NodeCreated: s.now, Owner: OwnerDeployment, NotReadySince: s.now, Container: "app", Restarts: 2, ReadAt: s.now}}
	s.now = s.now.Add(2*time.Minute + 59*time.Second)
	canary.Pods[0].ReadAt = s.now
	s.step("")
	canary.Pods[0].Ready = true
	s.step("")
	if s.rec.Waves[0].HealthyAt == nil {
		t.Fatalf("canary %+v: want it soaking once its pod is Ready", s.rec.Waves[0].Groups[0])
	}
	s.now = s.now.Add(2 * time.Minute)
	canary.PodsReadAt = s.rec.Waves[0].HealthyAt.Add(30 * time.Second) // read before the soak ended
	if res := s.step(""); s.rec.Wave != 0 || res.After != time.Second {
		t.Fatalf("soak over, pods read before its end: wave %d, after %s; want the canary waiting a second for a fresh read", s.rec.Wave, res.After)
	}
	canary.PodsReadAt = s.now
	s.step("")
	if s.rec.Phase != record.PhaseProgressing || s.rec.Wave != 1 {
		t.Fatalf("phase %s wave %d; want the rest wave started", s.rec.Phase, s.rec.Wave)
	}
}
