package nodehealth

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// replacements counts instances replaced for being unhealthy.
	replacements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_node_health_replacements_total",
		Help: "Instances terminated (without a capacity decrement) for replacement because their node did not become Ready within the startup timeout (reason StartupTimeout) or stayed NotReady past the unhealthy timeout (reason NotReady), by InstanceGroup.",
	}, []string{"namespace", "name", "reason"})
	// unhealthy is the number of unhealthy instances of a group at its
	// last check.
	unhealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_node_health_unhealthy_instances",
		Help: "Instances of an InstanceGroup judged unhealthy at its last check.",
	}, []string{"namespace", "name"})
	// halted is 1 while replacement is halted for a group (more than 20%
	// of its instances unhealthy).
	halted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_node_health_repair_halted",
		Help: "1 while replacing unhealthy instances is halted for an InstanceGroup because more than 20% of its instances are unhealthy.",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(replacements, unhealthy, halted)
}

// forgetMetrics drops the gauges of a deleted group.
func forgetMetrics(namespace, name string) {
	unhealthy.DeleteLabelValues(namespace, name)
	halted.DeleteLabelValues(namespace, name)
}
