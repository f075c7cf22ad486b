package instancegroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// setDrainDeadline writes status.drainDeadline: the admin's drain deadline
// for ig (boundary ConfigMap data.drains, drain.Drainer.Deadline) and,
// for each of its nodes the drain runner is draining now, when it passes
// (read from the node's drain start in the cache; a node gone is left
// out). Nil when none of ig's nodes drains or no deadline applies.
func (r *Reconciler) setDrainDeadline(ctx context.Context, ig *v1alpha1.InstanceGroup) {
	ig.Status.DrainDeadline = nil
	if r.Rolling == nil || r.Rolling.Drainer == nil || r.Rolling.Drainer.Deadline == nil || r.Rolling.Drains == nil {
		return
	}
	key := client.ObjectKeyFromObject(ig)
	after := r.Rolling.Drainer.Deadline(key)
	names := r.Rolling.Drains.Draining(key)
	if after <= 0 || len(names) == 0 {
		return
	}
	out := &v1alpha1.DrainDeadline{After: metav1.Duration{Duration: after}}
	for _, name := range names {
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			continue
		}
		if at := r.Rolling.Drainer.DeadlineAt(key, node); !at.IsZero() {
			out.Nodes = append(out.Nodes, v1alpha1.NodeDrainDeadline{Node: name, At: metav1.NewTime(at)})
		}
	}
	ig.Status.DrainDeadline = out
}
