package instancegroup

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Per InstanceGroup, labelled namespace and name, set at every status
// write and removed with the group; the chart's PrometheusRule alerts on
// them.
var (
	// groupError is 1 while the group's state is Error.
	groupError = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_instancegroup_error",
		Help: "1 while the InstanceGroup's status.currentState is Error (its Ready condition says why), else 0.",
	}, []string{"namespace", "name"})
	// groupUpgrading is 1 while the group rotates drifted nodes.
	groupUpgrading = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_instancegroup_upgrading",
		Help: "1 while the InstanceGroup's Upgrading condition is True (drifted nodes being rotated), else 0.",
	}, []string{"namespace", "name"})
	// groupNodesUpdated is status.nodesUpdated: its not changing while
	// upgrading is a stalled rollout.
	groupNodesUpdated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_instancegroup_nodes_updated",
		Help: "Instances of the InstanceGroup on the latest launch template version (status.nodesUpdated).",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(groupError, groupUpgrading, groupNodesUpdated)
}

// observeGroup sets the group's gauges from its status.
func observeGroup(ig *v1alpha1.InstanceGroup) {
	errored, upgrading := 0.0, 0.0
	if ig.Status.CurrentState == v1alpha1.StateError {
		errored = 1
	}
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionUpgrading); c != nil && c.Status == metav1.ConditionTrue {
		upgrading = 1
	}
	groupError.WithLabelValues(ig.Namespace, ig.Name).Set(errored)
	groupUpgrading.WithLabelValues(ig.Namespace, ig.Name).Set(upgrading)
	groupNodesUpdated.WithLabelValues(ig.Namespace, ig.Name).Set(float64(ig.Status.NodesUpdated))
}

// forgetGroup removes the gauges of a deleted group.
func forgetGroup(namespace, name string) {
	groupError.DeleteLabelValues(namespace, name)
	groupUpgrading.DeleteLabelValues(namespace, name)
	groupNodesUpdated.DeleteLabelValues(namespace, name)
}
