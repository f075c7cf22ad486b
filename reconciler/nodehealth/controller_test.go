package nodehealth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// rotator records terminations.
type rotator struct {
	terminated []string
	decrement  []bool
}

func (r *rotator) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, decrement bool) error {
	r.terminated = append(r.terminated, id)
	r.decrement = append(r.decrement, decrement)
	return nil
}

func (r *rotator) AddCapacity(context.Context, *v1alpha1.InstanceGroup, int) (int, error) {
	panic("node health never changes the desired capacity")
}

func drainEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRepairerReplacesWithoutDecrementAndHaltsAbove20Percent(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "repair"},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{NodeHealth: &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: time.Minute}}}}}
	now := t0.Add(time.Hour)
	rec := events.NewFakeRecorder(10)
	r := &Repairer{Recorder: rec, DrainAnnotation: drain, Now: func() time.Time { return now }}
	rot := &rotator{}

	// One of five never joined.
	w := &world{}
	for range 4 {
		w.add("InService", t0, ready, t0)
	}
	w.add("InService", t0, noNode, time.Time{})
	next, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot)
	if err != nil {
		t.Fatal(err)
	}
	if len(rot.terminated) != 1 || rot.terminated[0] != "i-04" || rot.decrement[0] {
		t.Fatalf("terminated %v (decrement %v), want i-04 without a decrement", rot.terminated, rot.decrement)
	}
	if next != 0 {
		t.Errorf("next check %s, want 0", next)
	}
	evs := drainEvents(rec)
	if len(evs) != 1 || !strings.Contains(evs[0], EventNodeUnhealthy) || !strings.Contains(evs[0], "i-04") {
		t.Errorf("events %v, want one %s naming i-04", evs, EventNodeUnhealthy)
	}
	if got := value(replacements.WithLabelValues("team-a", "repair", ReasonStartupTimeout)); got != 1 {
		t.Errorf("replacements metric %v, want 1", got)
	}
	c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ConditionReasonRepairing || !strings.Contains(c.Message, "replacing i-04") {
		t.Errorf("condition %+v, want Repairing naming i-04", c)
	}

	// Two of five NotReady: halted, nothing terminated, one Event however
	// often it is checked.
	w = &world{}
	for range 3 {
		w.add("InService", t0, ready, t0)
	}
	w.add("InService", t0, notReady, t0)
	w.add("InService", t0, notReady, t0)
	rot = &rotator{}
	for range 3 {
		if _, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil {
			t.Fatal(err)
		}
	}
	if len(rot.terminated) != 0 {
		t.Errorf("terminated %v while halted", rot.terminated)
	}
	evs = drainEvents(rec)
	if len(evs) != 1 || !strings.Contains(evs[0], EventRepairHalted) {
		t.Errorf("events %v, want one %s", evs, EventRepairHalted)
	}
	c = meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesHealthy)
	if c == nil || c.Reason != ConditionReasonHalted || !strings.Contains(c.Message, "2 of 5") {
		t.Errorf("condition %+v, want RepairHalted with 2 of 5", c)
	}
	if got := value(halted.WithLabelValues("team-a", "repair")); got != 1 {
		t.Errorf("halted metric %v, want 1", got)
	}

	// The status carrying the halt was lost (a write conflict, or a cache
	// that has not seen it yet): the halt is not announced again.
	lost := ig.DeepCopy()
	meta.RemoveStatusCondition(&lost.Status.Conditions, v1alpha1.ConditionNodesHealthy)
	if _, err := r.Check(context.Background(), lost, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil {
		t.Fatal(err)
	}
	if evs := drainEvents(rec); len(evs) != 0 {
		t.Errorf("events %v after a lost status write, want none", evs)
	}

	// Healthy again.
	w = &world{}
	w.add("InService", t0, ready, t0)
	if _, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil {
		t.Fatal(err)
	}
	c = meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesHealthy)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition %+v, want True", c)
	}
	if got := value(halted.WithLabelValues("team-a", "repair")); got != 0 {
		t.Errorf("halted metric %v, want 0", got)
	}

	// Halted again after recovering: news again.
	w = &world{}
	for range 3 {
		w.add("InService", t0, ready, t0)
	}
	w.add("InService", t0, notReady, t0)
	w.add("InService", t0, notReady, t0)
	if _, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil {
		t.Fatal(err)
	}
	if evs := drainEvents(rec); len(evs) != 1 || !strings.Contains(evs[0], EventRepairHalted) {
		t.Errorf("events %v, want one %s for the second halt", evs, EventRepairHalted)
	}
}

// value reads a counter's or gauge's current value.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// freshRotator is a rotator whose group, listed now, holds only the
// instances of now (providers.FreshLister).
type freshRotator struct {
	rotator
	now   []providers.Instance
	reads int
}

func (r *freshRotator) FreshInstances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	r.reads++
	return r.now, nil
}

// A cluster-autoscaler scale in: the shared listing still shows the
// instance InService, its Node is already deleted. Before terminating, node
// health re-reads the group (one call) and leaves alone what is gone or
// terminating; a healthy group is never re-read.
func TestRepairerRereadsTheGroupBeforeReplacing(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "scaled-in"},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{NodeHealth: &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: time.Minute}}}}}
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name      string
		freshNow  func(w *world) []providers.Instance
		wantTerm  []string
		wantReads int
	}{
		{"gone from the group", func(w *world) []providers.Instance { return w.instances[:4] }, nil, 1},
		{"terminating", func(w *world) []providers.Instance {
			l := append([]providers.Instance(nil), w.instances...)
			l[4].LifecycleState = "Terminating:Wait"
			return l
		}, nil, 1},
		{"still in service: replaced", func(w *world) []providers.Instance { return w.instances }, []string{"i-04"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{}
			for range 4 {
				w.add("InService", t0, ready, t0)
			}
			w.add("InService", t0, noNode, time.Time{})
			rot := &freshRotator{now: tc.freshNow(w)}
			r := &Repairer{Recorder: events.NewFakeRecorder(10), DrainAnnotation: drain, Now: func() time.Time { return now }}
			if _, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil {
				t.Fatal(err)
			}
			if strings.Join(rot.terminated, ",") != strings.Join(tc.wantTerm, ",") || rot.reads != tc.wantReads {
				t.Errorf("terminated %v after %d fresh reads, want %v after %d", rot.terminated, rot.reads, tc.wantTerm, tc.wantReads)
			}
		})
	}
	// Healthy: no read.
	w := &world{}
	w.add("InService", t0, ready, t0)
	rot := &freshRotator{now: w.instances}
	r := &Repairer{Recorder: events.NewFakeRecorder(10), DrainAnnotation: drain, Now: func() time.Time { return now }}
	if _, err := r.Check(context.Background(), ig, &providers.Observation{Instances: w.instances}, w.nodes, rot); err != nil || rot.reads != 0 {
		t.Errorf("healthy group: %d fresh reads (err %v), want none", rot.reads, err)
	}
}
