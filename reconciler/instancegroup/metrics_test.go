package instancegroup

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// The group gauges the chart's alerts read follow the stored status.
func TestGroupGaugesFollowTheStatus(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gauges"}}
	ig.Status.CurrentState = v1alpha1.StateError
	ig.Status.NodesUpdated = 2
	setCondition(ig, v1alpha1.ConditionUpgrading, true, "Rotating", "")
	observeGroup(ig)
	read := func(v interface{ Write(*dto.Metric) error }) float64 {
		var m dto.Metric
		if err := v.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	if e, u, n := read(groupError.WithLabelValues("team-a", "gauges")), read(groupUpgrading.WithLabelValues("team-a", "gauges")),
		read(groupNodesUpdated.WithLabelValues("team-a", "gauges")); e != 1 || u != 1 || n != 2 {
		t.Errorf("error %v, upgrading %v, nodes updated %v; want 1, 1, 2", e, u, n)
	}
	ig.Status.CurrentState = v1alpha1.StateReady
	setCondition(ig, v1alpha1.ConditionUpgrading, false, "UpToDate", "")
	observeGroup(ig)
	if e, u := read(groupError.WithLabelValues("team-a", "gauges")), read(groupUpgrading.WithLabelValues("team-a", "gauges")); e != 0 || u != 0 {
		t.Errorf("error %v, upgrading %v; want 0, 0", e, u)
	}
	forgetGroup("team-a", "gauges")
	if groupError.DeleteLabelValues("team-a", "gauges") {
		t.Error("the gauges of a deleted group are kept")
	}
}
