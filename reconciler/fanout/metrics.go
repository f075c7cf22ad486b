package fanout

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// readmissions counts InstanceGroups re-admitted after a boundary change.
	readmissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_boundaries_readmissions_total",
		Help: "InstanceGroups re-admitted after a boundary change, by result (applied, rejected, error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(readmissions)
}
