package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// throttled counts requests refused for a rate, by webhook (its path
// without the slash, or "other") and reason: user and namespace
// (AdmissionLimits), source (FrontDoor, when no allowed sources are set).
// Deliberately no user or namespace label: their number is the tenants'.
var throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_admission_throttled_total",
	Help: "Admission requests refused for a rate (429), by webhook and reason (user, namespace, source).",
}, []string{"webhook", "reason"})

func init() {
	metrics.Registry.MustRegister(throttled)
}
