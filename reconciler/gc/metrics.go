package gc

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// orphansDeleted counts deleted orphans by resource type
// (auto-scaling-group, launch-template, iam-role).
var orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_orphans_deleted_total",
	Help: "Cloud resources created by instance-manager whose InstanceGroup no longer exists or no longer uses them, deleted by the garbage collector, by resource type.",
}, []string{"resource"})

func init() { metrics.Registry.MustRegister(orphansDeleted) }
