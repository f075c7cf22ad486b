package interruption

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// DefaultReleaseAfter is Handler.ReleaseAfter's default: five times the
// two minutes of a spot interruption warning, and longer than an
// instance takes to stop or shut down, so an instance still InService
// with a Ready Node by then was not taken away.
const DefaultReleaseAfter = 10 * time.Minute

// adoptEvery is how often the Handler lists Nodes for interruption
// drains it does not track.
const adoptEvery = time.Minute

// adopt tracks the Nodes that carry an interruption's drain
// (drain.OwnerInterruption) the Handler does not know: the drain's record
// is the Node's annotations, so a restart or a leader change resumes it
// (the queue's message was deleted when it was first handled). At most
// once every adoptEvery; the Nodes come from the manager's cache.
func (h *Handler) adopt(ctx context.Context) {
	now := h.now()
	h.mu.Lock()
	due := now.Sub(h.lastScan) >= adoptEvery
	if due {
		h.lastScan = now
	}
	h.mu.Unlock()
	if !due {
		return
	}
	nodes := &corev1.NodeList{}
	if err := h.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).WithName("interruption").Info("listing nodes to resume interruption drains", "error", err.Error())
		h.mu.Lock()
		h.lastScan = time.Time{}
		h.mu.Unlock()
		return
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if drain.OwnerOf(node) != drain.OwnerInterruption {
			continue
		}
		id := providers.InstanceID(node.Spec.ProviderID)
		group := types.NamespacedName{Namespace: node.Labels[v1alpha1.LabelInstanceGroupNamespace], Name: node.Labels[v1alpha1.LabelInstanceGroup]}
		if w, ok := h.Owners.InstanceOwner(id); ok {
			group = w.Group
		}
		h.mu.Lock()
		if h.drains == nil {
			h.drains = map[string]*nodeDrain{}
		}
		if _, tracked := h.drains[node.Name]; !tracked {
			h.drains[node.Name] = &nodeDrain{group: group, instance: id}
			log.FromContext(ctx).WithName("interruption").Info("resuming an interruption drain", "node", node.Name, "instance", id, "group", group.String())
		}
		h.mu.Unlock()
	}
}

// releaseSurvivor gives back node, drained for an interruption, when its
// instance survived (review N11): ReleaseAfter past the drain's start,
// the last listing still shows it InService in its Auto Scaling group and
// its Node is Ready, as after a stop that was started again or a reclaim
// that did not come. Without this the node would stay cordoned for good,
// and node health, which leaves draining nodes alone, would never look at
// it again. An instance no longer listed, or not InService, is left: it
// is going.
func (h *Handler) releaseSurvivor(ctx context.Context, d *nodeDrain, node *corev1.Node) {
	started, err := time.Parse(time.RFC3339, node.Annotations[drain.AnnotationDrainStarted])
	if err != nil || h.now().Sub(started) < h.releaseAfter() || !drain.NodeReady(node) {
		return
	}
	w, listed := h.Owners.InstanceOwner(d.instance)
	if !listed || w.LifecycleState != "InService" {
		return
	}
	released, err := h.Drainer.Release(ctx, node, drain.OwnerInterruption)
	if err != nil {
		log.FromContext(ctx).WithName("interruption").Info("giving back the node of a surviving instance", "node", node.Name, "error", err.Error())
		return
	}
	h.forget(node.Name)
	if released {
		survivorsReleased.Inc()
		h.event(ctx, d.group, node, corev1.EventTypeNormal, EventSurvivorReleased,
			"Instance %s is still InService with a Ready node %s after its interruption drain started at %s: the node is uncordoned and schedulable again",
			d.instance, node.Name, started.UTC().Format(time.RFC3339))
	}
}

func (h *Handler) releaseAfter() time.Duration {
	if h.ReleaseAfter > 0 {
		return h.ReleaseAfter
	}
	return DefaultReleaseAfter
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}
