package interruption

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// messages counts the queue's messages by kind and outcome.
	messages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_interruption_messages_total",
		Help: "Messages read from the interruption queue, by kind (lifecycle_terminate, spot_interruption, rebalance_recommendation, state_change, other, unparseable) and outcome (handed_over, draining, event_only, no_node, not_ours, ignored, retry: kept for redelivery, unparseable). All but retry are deleted.",
	}, []string{"kind", "outcome"})
	// receiveErrors counts failed ReceiveMessage and DeleteMessage calls.
	receiveErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_interruption_queue_errors_total",
		Help: "Failed calls to the interruption queue, by call (ReceiveMessage, DeleteMessage).",
	}, []string{"call"})
	// survivorsReleased counts nodes given back because their interrupted
	// instance survived (Handler.releaseSurvivor).
	survivorsReleased = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_interruption_drains_released_total",
		Help: "Nodes drained for an interruption and uncordoned again because their instance was still InService with a Ready node 10 minutes after the drain started.",
	})
)

func init() {
	metrics.Registry.MustRegister(messages, receiveErrors, survivorsReleased)
}
