// Package upgrade holds the upgrade strategies that rotate drifted nodes
// (rollingUpdate, crd), the drain that rollingUpdate uses, and the
// cluster-wide cap on groups rotating at once (LeaseSlots, judged by
// SlotsFull).
package upgrade
