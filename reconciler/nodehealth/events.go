package nodehealth

// Event reasons, on the InstanceGroup.
const (
	// EventNodeUnhealthy (Warning): an unhealthy instance was terminated
	// for replacement; the note says why.
	EventNodeUnhealthy = "NodeUnhealthyReplaced"
	// EventRepairHalted (Warning): more than 20% of the group's instances
	// are unhealthy, so none is replaced until fewer are.
	EventRepairHalted = "NodeRepairHalted"
)

// Condition reasons of v1alpha1.ConditionNodesHealthy.
const (
	ConditionReasonHealthy   = "Healthy"
	ConditionReasonRepairing = "Repairing"
	ConditionReasonHalted    = "RepairHalted"
)
