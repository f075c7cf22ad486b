package termination

// Event reasons, on the InstanceGroup that owns the Auto Scaling group.
const (
	// EventDrainStarted (Normal): Auto Scaling is terminating an instance
	// on its own (a person, scale in, health replacement, rebalancing,
	// max instance lifetime) and the controller cordoned its node and
	// started draining it; the instance waits in Terminating:Wait.
	EventDrainStarted = "TerminationDrainStarted"
	// EventDrained (Normal): the node of an instance Auto Scaling is
	// terminating is drained and the lifecycle action completed (CONTINUE).
	EventDrained = "TerminationDrained"
	// EventDrainBlocked (Warning): the drain is past the drain timeout
	// with evictions still refused (PodDisruptionBudgets); the controller
	// keeps trying and keeps the instance waiting (heartbeats) until the
	// hook's global timeout, after which Auto Scaling terminates it.
	EventDrainBlocked = "TerminationDrainBlocked"
)

// action is the Events' action.
const action = "DrainTermination"
