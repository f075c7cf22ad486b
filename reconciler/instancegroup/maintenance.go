package instancegroup

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// markerMaintenance is the slot progress marker while a holder waits for
// a maintenance window: when the window opens the marker changes back and
// the stall clock starts again, so a wait outside the window is never
// judged a stall.
const markerMaintenance = "waiting for a maintenance window"

// maintenanceWait says whether the group key may start disrupting nodes
// now (the boundaries' maintenance windows and freezes, narrowed by the
// group's namespace's, boundaries.Maintenance.For and Open). It returns "" when it may: the window is
// open (or there is none). Otherwise it returns why not, and whether the
// group already holds an upgrade slot: a holder is mid-rotation and
// finishes its batch in flight before it waits; a group without one does
// not take one. Errors come from the slot keeper.
func (r *Reconciler) maintenanceWait(ctx context.Context, key types.NamespacedName) (why string, holder bool, err error) {
	if why = r.outsideWindow(key.Namespace); why == "" {
		return "", false, nil
	}
	_, holder, err = r.Slots.LastProgress(ctx, key)
	if err != nil {
		return "", false, err
	}
	if holder {
		if _, err := r.Slots.Progress(ctx, key, markerMaintenance); err != nil {
			return "", false, err
		}
	}
	return why, holder, nil
}

// outsideWindow says why no change may start now on a group of namespace
// (the boundaries' maintenance windows and freezes, narrowed by the
// namespace's: boundaries.Maintenance.For and Open); "" when one may, or
// there are no boundaries.
func (r *Reconciler) outsideWindow(namespace string) string {
	if r.Boundaries == nil {
		return ""
	}
	_, _, why := r.Boundaries.Get().Maintenance().For(namespace).Open(r.now())
	return why
}
