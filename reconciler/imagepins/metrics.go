package imagepins

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// lookups counts the AWS lookups, by operation and result (ok,
	// not_found, error).
	lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_image_pins_lookups_total",
		Help: "AWS lookups of the image pin controller, by operation (DescribeCluster, GetParameter) and result (ok, not_found, error).",
	}, []string{"operation", "result"})
	// changes counts the pins written, by kind (values, added, cleared).
	changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_image_pins_changes_total",
		Help: "Changes of the image pins written into the rollout record, by kind: values (AWS resolves a reference to another value: a new revision rolls it out), added, cleared.",
	}, []string{"kind"})
	// pinned is how many SSM parameters are pinned.
	pinned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_image_pins_parameters",
		Help: "SSM parameters whose AMI id the current boundaries revision pins.",
	})
)

func init() {
	metrics.Registry.MustRegister(lookups, changes, pinned)
}

// result is the lookups label of err (notFound: the cluster or parameter
// does not exist).
func result(err error, notFound bool) string {
	switch {
	case err == nil:
		return "ok"
	case notFound:
		return "not_found"
	}
	return "error"
}
