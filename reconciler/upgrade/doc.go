// Package upgrade holds the upgrade strategies that rotate drifted nodes
// (rollingUpdate, crd) and the cluster-wide cap on groups rotating at once
// (LeaseSlots, judged by SlotsFull). Nodes are drained through
// reconciler/drain.
package upgrade
