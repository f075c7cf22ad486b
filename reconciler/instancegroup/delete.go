package instancegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"

	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// Reasons of the Deleting condition (besides ReasonDrainBlocked and
// ReasonForceDelete).
const (
	reasonDraining      = "Draining"
	reasonDeletingCloud = "DeletingCloudResources"
)

// delete removes a deleted group (prov: the provisioner that built it;
// every provisioner call sees the group through deletionView): it freezes the group (a
// providers.Freezer stops it launching instances), cordons and drains the
// group's nodes through the Eviction API (PodDisruptionBudgets respected,
// DaemonSet pods skipped; in the background, see drain.Drains), reads
// every node's pods again once all drains ended (none may be left but
// DaemonSet, mirror and finished pods), then has the provisioner delete
// the cloud resources, then removes the finalizer. A
// drain blocked past the drain timeout is reported (Warning Event
// DrainBlocked, condition Deleting reason DrainBlocked naming the nodes
// and pods) and retried, never forced; the annotation
// instancemgr.keikoproj.io/force-delete: "true" skips the drain.
func (r *Reconciler) delete(ctx context.Context, ig *v1alpha1.InstanceGroup, prov providers.Provisioner) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ig, Finalizer) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(ig)
	if err := r.Slots.Release(ctx, key, slots.ReasonDeleted); err != nil {
		return ctrl.Result{}, err
	}
	if prov != nil {
		before := ig.DeepCopy()
		ig.Status.CurrentState = v1alpha1.StateDeleting
		drained, err := r.drainForDelete(ctx, ig, prov)
		if err != nil {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDeleteFailed, "Delete", "Draining the group's nodes: %v", err)
			setCondition(ig, v1alpha1.ConditionDeleting, true, reasonDraining, stableMessage(err.Error()))
			if perr := r.patchStatus(ctx, before, ig); perr != nil {
				return ctrl.Result{}, perr
			}
			return ctrl.Result{RequeueAfter: r.backoff.failed(key, ig.Generation)}, nil
		}
		if !drained {
			return ctrl.Result{RequeueAfter: r.PollInterval}, r.patchStatus(ctx, before, ig)
		}
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionDeleting); c == nil || c.Reason != ReasonForceDelete {
			setCondition(ig, v1alpha1.ConditionDeleting, true, reasonDeletingCloud, "every node of the group is drained; deleting its cloud resources")
		}
		if err := r.patchStatus(ctx, before, ig); err != nil {
			return ctrl.Result{}, err
		}
		before = ig.DeepCopy()
		done, err := prov.Delete(providers.WithEvents(ctx, r.eventSink(ig, "Delete")), deletionView(ig))
		if err != nil {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDeleteFailed, "Delete", "Deleting cloud resources: %v", err)
			setCondition(ig, v1alpha1.ConditionDeleting, true, ReasonDeleteFailed, "deleting the cloud resources failed; retrying: "+stableMessage(err.Error()))
			if perr := r.patchStatus(ctx, before, ig); perr != nil {
				return ctrl.Result{}, perr
			}
			return ctrl.Result{}, err
		}
		if !done {
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete", "Every cloud resource of the group was deleted")
	}
	if r.Rolling != nil && r.Rolling.Drains != nil {
		r.Rolling.Drains.Cancel(key)
	}
	r.NodeHealth.Forget(ig)
	forgetGroup(ig.Namespace, ig.Name)
	return r.releaseFinalizer(ctx, ig)
}

// releaseFinalizer removes Finalizer from the stored group with a JSON
// merge patch of metadata.finalizers alone, guarded by the resourceVersion
// read (a conflict requeues at once). A full Update would send the spec as
// this controller's Go types serialise it, which is not always the stored
// spec byte for byte (fields written as zero values or empty lists by a
// tenant or an older version of the CRD are dropped by omitempty), and the
// validating webhook refuses any spec change on a group being deleted: the
// finalizer would never go and the group, and its namespace, would stay
// Terminating for good. The webhooks' match condition skips this patch
// altogether (webhooks.Configurations), so it goes through during an
// admission outage too. Any other refusal (a foreign admission webhook or
// policy, RBAC) is said where the user looks: a Warning Event
// FinalizerRemovalFailed and the Deleting condition with that reason and
// the API server's answer; it is retried with the failure backoff.
func (r *Reconciler) releaseFinalizer(ctx context.Context, ig *v1alpha1.InstanceGroup) (ctrl.Result, error) {
	before := ig.DeepCopy()
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(ig, Finalizer)
	err := r.Client.Patch(ctx, ig, patch)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	msg := fmt.Sprintf("removing the finalizer %s was refused by the API server; the group stays until it goes: %v", Finalizer, err)
	r.Recorder.Eventf(before, nil, corev1.EventTypeWarning, ReasonFinalizerRemovalFailed, "Delete", "%s", msg)
	log.FromContext(ctx).Info("finalizer removal failed", "error", err.Error())
	cur := before.DeepCopy()
	setCondition(cur, v1alpha1.ConditionDeleting, true, ReasonFinalizerRemovalFailed, stableMessage(msg))
	if perr := r.patchStatus(ctx, before, cur); perr != nil {
		return ctrl.Result{}, perr
	}
	return ctrl.Result{RequeueAfter: r.backoff.failed(client.ObjectKeyFromObject(ig), ig.Generation)}, nil
}

// forceDelete reports whether the group asks to be deleted without a drain.
func forceDelete(ig *v1alpha1.InstanceGroup) bool {
	return strings.EqualFold(ig.Annotations[v1alpha1.AnnotationForceDelete], "true")
}

// drainForDelete cordons the group's nodes and advances their drains; it
// returns true once every node is drained (or the force-delete annotation
// skips the drain), setting the Deleting condition either way. Errors come
// from the API server or the cloud listing.
func (r *Reconciler) drainForDelete(ctx context.Context, ig *v1alpha1.InstanceGroup, prov providers.Provisioner) (bool, error) {
	key := client.ObjectKeyFromObject(ig)
	prev := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionDeleting)
	if forceDelete(ig) {
		if r.Rolling != nil && r.Rolling.Drains != nil {
			r.Rolling.Drains.Cancel(key)
		}
		msg := fmt.Sprintf("metadata.annotations[%s] is \"true\": the cloud resources are deleted without draining the group's nodes (their pods are killed without eviction)", v1alpha1.AnnotationForceDelete)
		if prev == nil || prev.Reason != ReasonForceDelete {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonForceDelete, "Delete", "%s", msg)
		}
		setCondition(ig, v1alpha1.ConditionDeleting, true, ReasonForceDelete, msg)
		return true, nil
	}
	if r.Rolling == nil || r.Rolling.Drainer == nil {
		return true, nil // no drainer configured (tests of other paths)
	}
	if f, ok := prov.(providers.Freezer); ok {
		// Before any eviction: the evicted pods go Pending, and a group
		// that can still grow (the cluster-autoscaler) would take them on
		// new, uncordoned nodes of its own.
		if err := f.Freeze(ctx, deletionView(ig)); err != nil {
			return false, fmt.Errorf("freezing group %s/%s before its drain: %w", ig.Namespace, ig.Name, err)
		}
	}
	nodes, err := r.deleteNodes(ctx, ig, prov)
	if err != nil {
		return false, err
	}
	var draining, blocked, waits []string
	defer r.setDrainDeadline(ctx, ig)
	for _, node := range nodes {
		if drain.NeedsStart(node, drain.OwnerDelete) {
			// A rotation's drain is taken over: no rotation path may
			// give this node back any more.
			if err := r.Rolling.Drainer.Start(ctx, node, drain.OwnerDelete); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return false, err
			}
		}
		res, msg, err := r.Rolling.Drain(ctx, ig, node)
		if err != nil {
			return false, err
		}
		switch res {
		case drain.Drained:
		case drain.Blocked:
			blocked = append(blocked, msg)
		case drain.Draining:
			draining = append(draining, node.Name)
			if msg != "" { // what it waits for: which pods, and until when
				waits = append(waits, node.Name+": "+msg)
			}
		}
	}
	switch {
	case len(blocked) > 0:
		msg := fmt.Sprintf("%s; retrying (no drain deadline applies: the admin can set one in the boundary ConfigMap, data.drains, "+
			"after which such pods are deleted; or set metadata.annotations[%s]: \"true\" to delete without draining)",
			strings.Join(blocked, "; "), v1alpha1.AnnotationForceDelete)
		if prev == nil || prev.Reason != ReasonDrainBlocked {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonDrainBlocked, "Delete", "%s", msg)
		}
		setCondition(ig, v1alpha1.ConditionDeleting, true, ReasonDrainBlocked, msg)
		return false, nil
	case len(draining) == 0:
		// Every drain ended Drained, some maybe a while ago: read each
		// node's pods again before anything is terminated.
		if draining, err = r.undrained(ctx, ig, nodes); err != nil || len(draining) == 0 {
			return err == nil, err
		}
	}
	if stillBlocked(prev, draining) {
		// The drain runner hands a Blocked outcome out once and retries
		// the node: while that retry runs, the node is as blocked as it
		// was, so the condition keeps saying so (and the next Blocked
		// outcome is not announced again).
		return false, nil
	}
	msg := fmt.Sprintf("draining %d of %d node(s) before deleting the cloud resources: %s", len(draining), len(nodes), strings.Join(draining, ", "))
	if len(waits) > 0 {
		msg += " (" + strings.Join(waits, "; ") + ")"
	}
	setCondition(ig, v1alpha1.ConditionDeleting, true, reasonDraining, msg)
	return false, nil
}

// stillBlocked reports whether prev, the group's Deleting condition, is
// DrainBlocked for one of the nodes still draining (its message names
// each blocked node as drain.Drainer words it: "node <name> could not
// be drained").
func stillBlocked(prev *metav1.Condition, draining []string) bool {
	if prev == nil || prev.Reason != ReasonDrainBlocked {
		return false
	}
	return slices.ContainsFunc(draining, func(node string) bool {
		return strings.Contains(prev.Message, "node "+node+" could not be drained")
	})
}

// undrained reads the pods of nodes, whose drains all ended Drained, from
// the API server (Drainer.Remaining): a pod that landed on one after its
// drain ended (a pod tolerating the cordon, bound by a scheduler that had
// not seen it yet, or placed by name) would die with the instance. Such a
// node's drain starts again; it returns those nodes, each with its pods.
func (r *Reconciler) undrained(ctx context.Context, ig *v1alpha1.InstanceGroup, nodes []*corev1.Node) ([]string, error) {
	var out []string
	for _, node := range nodes {
		pods, err := r.Rolling.Drainer.RemainingFor(ctx, client.ObjectKeyFromObject(ig), node)
		if err != nil {
			return nil, err
		}
		if len(pods) == 0 {
			continue
		}
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		out = append(out, fmt.Sprintf("%s (pods back on it after its drain: %s)", node.Name, strings.Join(names, ", ")))
		if r.Rolling.Drains != nil {
			r.Rolling.Drains.Stop(node.Name) // its outcome, Drained, is stale
		}
		if _, _, err := r.Rolling.Drain(ctx, ig, node); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deleteNodes returns the group's Nodes, sorted by name: those carrying
// the group's labels, and those whose provider id is one of the group's
// instances (a providers.InstanceLister), matched as the reconciler
// matches them (matchNodes).
func (r *Reconciler) deleteNodes(ctx context.Context, ig *v1alpha1.InstanceGroup, prov providers.Provisioner) ([]*corev1.Node, error) {
	var instances []providers.Instance
	if l, ok := prov.(providers.InstanceLister); ok {
		var err error
		if instances, err = l.Instances(ctx, deletionView(ig)); err != nil {
			return nil, fmt.Errorf("listing the instances of group %s/%s to drain: %w", ig.Namespace, ig.Name, err)
		}
	}
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byID := matchNodes(instances, list.Items)
	var out []*corev1.Node
	for i := range list.Items {
		n := &list.Items[i]
		labelled := n.Labels[v1alpha1.LabelInstanceGroup] == ig.Name && n.Labels[v1alpha1.LabelInstanceGroupNamespace] == ig.Namespace
		if labelled || byID[n.Spec.ProviderID] == n {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
