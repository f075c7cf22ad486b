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
)

func init() {
	metrics.Registry.MustRegister(messages, receiveErrors)
}
