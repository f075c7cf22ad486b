package termination

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// completions counts lifecycle actions of the drain hook this
	// controller completed, by why it could.
	completions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_termination_hook_completions_total",
		Help: "Terminating:Wait lifecycle actions of the drain hook completed with CONTINUE, by reason: drained (this controller drained the node), already_drained (the node was drained before Auto Scaling was asked to terminate it: a rotation, a delete), no_node (the instance has no Node), not_waiting (Auto Scaling had no action of the drain hook pending for it: completed by someone else or timed out).",
	}, []string{"reason"})
	// waiting is the instances in Terminating:Wait at the last pass.
	waiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_termination_hook_waiting_instances",
		Help: "Instances of the controller's Auto Scaling groups waiting in Terminating:Wait at the last pass of the termination controller.",
	})
	// heartbeats counts RecordLifecycleActionHeartbeat calls.
	heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_termination_hook_heartbeats_total",
		Help: "RecordLifecycleActionHeartbeat calls made to keep an instance waiting while its node drains.",
	})
)

func init() {
	metrics.Registry.MustRegister(completions, waiting, heartbeats)
}
