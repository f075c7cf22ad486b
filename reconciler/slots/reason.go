package slots

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reason says why an InstanceGroup gives its upgrade slot back (Keeper
// .Release): the label of instance_manager_upgrade_slot_releases_total
// and a field of the release's log line.
type Reason string

const (
	// ReasonDone: the rotation (or a managed group's replacement, or a
	// surge give-back) finished, or the group has nothing to rotate.
	ReasonDone Reason = "done"
	// ReasonStopped: the rotation stopped after replacements that never
	// joined; it waits for a new launch template version.
	ReasonStopped Reason = "stopped"
	// ReasonStalled: the holder made no progress for the stall timeout
	// (its rotation, its managed replacement, or a reconcile that keeps
	// failing); it asks again one stall timeout later.
	ReasonStalled Reason = "stalled"
	// ReasonHeld: the admission gate holds the group (its stored spec was
	// admitted under earlier boundaries); it rotates again once
	// re-admitted.
	ReasonHeld Reason = "held"
	// ReasonDeleted: the group is being deleted.
	ReasonDeleted Reason = "deleted"
)

// Reasons lists every Reason, in the order above.
var Reasons = []Reason{ReasonDone, ReasonStopped, ReasonStalled, ReasonHeld, ReasonDeleted}

// releases counts the slots given back, by reason; a Release of a group
// that held no slot is not counted.
var releases = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_upgrade_slot_releases_total",
	Help: "Upgrade slots given back, by reason: done, stopped (replacements never joined), stalled (no progress for --upgrade-stall-timeout), held (the admission gate holds the group), deleted.",
}, []string{"reason"})

func init() {
	metrics.Registry.MustRegister(releases)
	for _, r := range Reasons {
		releases.WithLabelValues(string(r)) // every series exists from the start
	}
}
