// Package upgrade holds the upgrade strategies that rotate drifted nodes
// (rollingUpdate, crd). Nodes are drained through reconciler/drain; the
// cap on groups rotating at once is reconciler/slots, which the
// InstanceGroup reconciler takes before it steps a strategy.
package upgrade
