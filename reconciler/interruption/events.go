package interruption

// Event reasons, on the Node and on its InstanceGroup.
const (
	// EventDrainStarted (Warning): EC2 is about to reclaim the instance
	// (spot interruption warning, two minutes ahead) or it is shutting
	// down or stopping; its node is cordoned and drained.
	EventDrainStarted = "InterruptionDrainStarted"
	// EventDrained (Normal): the node of an interrupted instance is
	// drained.
	EventDrained = "InterruptionDrained"
	// EventDrainBlocked (Warning): evictions are still refused
	// (PodDisruptionBudgets) past the drain timeout; they are retried.
	EventDrainBlocked = "InterruptionDrainBlocked"
	// EventSurvivorReleased (Normal): the node of an interrupted instance
	// that is still InService with a Ready node long after its drain
	// started is uncordoned (Handler.ReleaseAfter).
	EventSurvivorReleased = "InterruptionDrainReleased"
	// EventRebalance (Normal): EC2 recommends rebalancing the instance;
	// nothing is done.
	EventRebalance = "RebalanceRecommended"
)

// action is the Events' action.
const action = "DrainInterruption"
