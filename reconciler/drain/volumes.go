package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// VolumeDetachWait bounds how long a drain whose pods are all gone waits
// for the node's volumes to detach (its storage.k8s.io/v1
// VolumeAttachments, spec.nodeName, status.attached) before it reports
// Drained, counted from the first step that found the pods gone. An
// instance terminated with an EBS volume still attached keeps that volume
// until EC2 has shut it down, and the pod moved elsewhere waits on a
// Multi-Attach error meanwhile; the CSI attacher usually detaches within
// a minute of the pods' unmount. Past the bound the drain goes on (a
// detach that hangs is not the drain's to fix; terminating the instance
// detaches it too).
const VolumeDetachWait = 3 * time.Minute

// detaching holds, per node (name and UID), when its pods were first found
// gone with volumes still attached. It is in memory: a restart waits again,
// within the same bound.
var detaching = &detachClock{since: map[string]time.Time{}}

type detachClock struct {
	mu     sync.Mutex
	since  map[string]time.Time
	warned bool // a listing was refused (RBAC older than the image): said once
}

// first returns when key was first seen waiting, recording now if never,
// and forgets entries older than an hour (drains released meanwhile).
func (c *detachClock) first(key string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range c.since {
		if now.Sub(t) > time.Hour {
			delete(c.since, k)
		}
	}
	if t, ok := c.since[key]; ok {
		return t
	}
	c.since[key] = now
	return now
}

func (c *detachClock) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.since, key)
}

// detached turns a Drained step result into Draining while the node's
// volumes are still attached, within VolumeDetachWait (see there); other
// results pass through. A node that is not Ready is not waited for: no
// kubelet unmounts its volumes, and terminating its instance detaches
// them. A VolumeAttachments listing the controller may not make
// (Forbidden: the chart's RBAC is older than the image) waits for nothing.
// Other listing errors are returned, naming the node.
func (d *Drainer) detached(ctx context.Context, node *corev1.Node, res DrainResult, msg string, err error) (DrainResult, string, error) {
	if res != Drained || err != nil || d.Kube == nil || !NodeReady(node) {
		return res, msg, err
	}
	list, err := d.Kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		detaching.mu.Lock()
		warn := !detaching.warned
		detaching.warned = true
		detaching.mu.Unlock()
		if warn {
			log.FromContext(ctx).Info("WARNING: may not list VolumeAttachments (chart RBAC older than the image?): drains do not wait for volumes to detach", "error", err.Error())
		}
		return Drained, "", nil
	}
	if err != nil {
		return Draining, "", fmt.Errorf("listing the VolumeAttachments of drained node %s: %w", node.Name, err)
	}
	var attached []string
	for _, va := range list.Items {
		if va.Spec.NodeName == node.Name && va.Status.Attached {
			pv := va.Name
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			attached = append(attached, pv)
		}
	}
	key := node.Name + "/" + string(node.UID)
	if len(attached) == 0 {
		detaching.forget(key)
		return Drained, "", nil
	}
	now := d.Now()
	waited := now.Sub(detaching.first(key, now))
	if waited >= VolumeDetachWait {
		detaching.forget(key)
		log.FromContext(ctx).Info("drained node's volumes still attached past the wait; going on", "node", node.Name,
			"wait", VolumeDetachWait.String(), "volumes", strings.Join(attached, ","))
		return Drained, "", nil
	}
	slices.Sort(attached)
	return Draining, fmt.Sprintf("node %s has no pod left; waiting up to %s more for %d volume(s) to detach: %s",
		node.Name, (VolumeDetachWait - waited).Round(time.Second), len(attached), strings.Join(attached, ", ")), nil
}
