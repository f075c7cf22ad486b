// Package drain is the one drain path of instance-manager: Drainer
// cordons a Node and evicts its pods through the Eviction API (policy/v1,
// PodDisruptionBudgets honoured), and Drains runs those drains in the
// background, capped cluster-wide and per InstanceGroup, for every
// controller that takes a node out (the rotation strategies, deletion,
// managed retirement, the termination hook, interruptions, node health,
// the garbage collector). It sits at the bottom of the reconciler and
// imports nothing of it.
package drain
