package instancegroup

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

func drifted(id, why string) providers.Instance {
	return providers.Instance{ID: id, LifecycleState: "InService", UpToDate: why == "", Drift: why}
}

// The status says why instances drifted, grouped by cause and bounded.
func TestDriftSummary(t *testing.T) {
	subnet, version := "subnet subnet-a is no longer listed", "launch template version 2 differs from version 3"
	cases := []struct {
		name      string
		instances []providers.Instance
		want      string
	}{
		{"none", []providers.Instance{drifted("i-1", "")}, ""},
		{"grouped by cause", []providers.Instance{drifted("i-1", subnet), drifted("i-2", version), drifted("i-3", subnet), drifted("i-4", "")},
			"drift: " + subnet + " (2: i-1, i-3); " + version + " (1: i-2)"},
		{"terminating ones are leaving", []providers.Instance{{ID: "i-1", LifecycleState: "Terminating:Wait", Drift: subnet}}, ""},
		{"bounded", []providers.Instance{drifted("i-1", "a"), drifted("i-2", "b"), drifted("i-3", "c"), drifted("i-4", "d"),
			drifted("i-5", "a"), drifted("i-6", "a"), drifted("i-7", "a")},
			"drift: a (4: i-1, i-5, i-6, ...); b (1: i-2); c (1: i-3); 1 more cause(s)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := driftSummary(&providers.Observation{Instances: c.instances}); got != c.want {
				t.Errorf("summary %q, want %q", got, c.want)
			}
		})
	}
}

// The cause goes into the Upgrading condition each pass, and into an
// Event only when the stored condition does not say it yet.
func TestExplainDriftEventsOncePerCause(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec}
	ig := &v1alpha1.InstanceGroup{}
	obs := &providers.Observation{Instances: []providers.Instance{drifted("i-1", "subnet subnet-a is no longer listed")}}
	s := &scope{ig: ig, before: ig.DeepCopy(), obs: obs, progress: upgrade.Progress{Message: "draining 1 node(s)"}}
	r.explainDrift(s)
	want := "draining 1 node(s); drift: subnet subnet-a is no longer listed (1: i-1)"
	if s.progress.Message != want {
		t.Fatalf("message %q, want %q", s.progress.Message, want)
	}
	if len(rec.Events) != 1 || !strings.Contains(<-rec.Events, "InstancesDrifted") {
		t.Fatal("no InstancesDrifted Event for a new cause")
	}
	setCondition(s.before, v1alpha1.ConditionUpgrading, true, "Rotating", "1 of 2 updated: "+want)
	s.progress.Message = ""
	r.explainDrift(s)
	if len(rec.Events) != 0 {
		t.Errorf("an Event again for a cause the status says already: %v", <-rec.Events)
	}
}
