package gc

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// orphansDeleted counts deleted orphans by resource type
// (auto-scaling-group, launch-template, nodegroup, fargate-profile,
// iam-role).
var orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_orphans_deleted_total",
	Help: "Cloud resources created by instance-manager whose InstanceGroup no longer exists or no longer uses them, deleted by the garbage collector, by resource type.",
}, []string{"resource"})

// orphansFound is the number of orphans the last sweep found, by resource
// type, whether or not they were due or deleted (with --gc-dry-run, what
// would be deleted).
var orphansFound = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "instance_manager_orphans",
	Help: "Cloud resources created by instance-manager that the last garbage collection sweep found orphaned (their InstanceGroup gone or no longer using them), by resource type.",
}, []string{"resource"})

func init() { metrics.Registry.MustRegister(orphansDeleted, orphansFound) }
