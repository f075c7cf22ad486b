package boundaryload

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// boundariesValid is 1 while the newest boundary ConfigMap parses, 0
	// while the controller runs on the last valid one.
	boundariesValid = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_valid",
		Help: "1 if the newest boundary ConfigMap is valid, 0 if the controller keeps the last valid boundaries.",
	})
	// boundariesRejected counts ConfigMap versions that failed to parse.
	boundariesRejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_boundaries_invalid_total",
		Help: "Boundary ConfigMap versions the controller found invalid and ignored.",
	})
)

func init() {
	metrics.Registry.MustRegister(boundariesValid, boundariesRejected)
}
