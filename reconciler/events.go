package reconciler

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// eventSink records what the provisioner emits (providers.Emit) during
// action ("Reconcile", "Delete") as Events on ig.
func (r *InstanceGroupReconciler) eventSink(ig *v1alpha1.InstanceGroup, action string) providers.EventSink {
	return func(eventType, reason, message string) {
		if r.Recorder != nil {
			r.Recorder.Eventf(ig, nil, eventType, reason, action, "%s", message)
		}
	}
}
