package drain

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// DeadlineGracePeriod caps the grace period of a pod a drain deletes past
// its deadline (the admin's, boundary ConfigMap data.drains): the pod's
// own terminationGracePeriodSeconds when shorter, else 60 s, so that a
// pod with an hour-long grace period cannot hold the node for that hour
// after the deadline. A pod already terminating with more than this left
// is deleted again with the cap (the API server shortens a grace period,
// never lengthens it). EKS managed node groups give pods no more after
// their 15-minute force; Karpenter deletes a pod early enough for its
// grace period to end by the NodePool's terminationGracePeriod.
const DeadlineGracePeriod = 60 * time.Second

// Reasons of the Warning Events a bounded drain records on the Node and on
// the InstanceGroup whose drain it is.
const (
	// ReasonDrainDeadline: past the drain deadline, a pod whose eviction
	// was refused or failed, or that was still terminating, was deleted
	// (grace period capped at DeadlineGracePeriod).
	ReasonDrainDeadline = "DrainDeadlinePodDeleted"
	// ReasonDrainPodsLeft: pods that tolerate the cordon came back to the
	// node after MaxArrivalEvictions evictions of their workload (or past
	// the deadline) and are left to go with the node.
	ReasonDrainPodsLeft = "DrainPodsLeft"
)

var deadlineDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "instance_manager_drain_deadline_pods_deleted_total",
	Help: "Pods a drain deleted past the admin's drain deadline (boundary ConfigMap data.drains), by why they were still there " +
		"(eviction_refused: a PodDisruptionBudget; eviction_failed: another Eviction API error; terminating: a grace period longer than the cap).",
}, []string{"reason"})

func init() {
	metrics.Registry.MustRegister(deadlineDeletions, podsLeft)
}

// deadlineAt returns when the drain of node for group passes the admin's
// deadline (Deadline, counted from AnnotationDrainStarted); zero when no
// deadline applies or the node carries no valid drain start.
func (d *Drainer) deadlineAt(group types.NamespacedName, node *corev1.Node) time.Time {
	if d.Deadline == nil {
		return time.Time{}
	}
	limit := d.Deadline(group)
	started, err := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainStarted])
	if limit <= 0 || err != nil {
		return time.Time{}
	}
	return started.Add(limit)
}

// DeadlineAt returns when the drain of node, a node of group, passes the
// admin's drain deadline: its drain start (AnnotationDrainStarted) plus
// Deadline(group); zero when no deadline applies. For status reports.
func (d *Drainer) DeadlineAt(group types.NamespacedName, node *corev1.Node) time.Time {
	return d.deadlineAt(group, node)
}

// force deletes e's pod past the drain deadline (why: the metric's reason)
// with its grace period capped at DeadlineGracePeriod, preconditioned on
// its UID (a pod of the same name created since is left alone), and
// records a Warning Event naming it on node and on group's InstanceGroup.
// A pod already gone is not an error; other errors come from the API
// server and name the pod.
func (d *Drainer) force(ctx context.Context, group types.NamespacedName, node *corev1.Node, e *evicting, why string, at time.Time) error {
	grace := int64(DeadlineGracePeriod / time.Second)
	if own := e.pod.Spec.TerminationGracePeriodSeconds; own != nil && *own < grace {
		grace = *own
	}
	uid := e.pod.UID
	err := d.Kube.CoreV1().Pods(e.pod.Namespace).Delete(ctx, e.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		e.gone = true
		return nil
	case err != nil:
		return fmt.Errorf("deleting pod %s/%s past the drain deadline of node %s: %w", e.pod.Namespace, e.pod.Name, node.Name, err)
	}
	e.forced = true
	deadlineDeletions.WithLabelValues(why).Inc()
	d.warn(ctx, group, node, ReasonDrainDeadline, "Deleted pod %s/%s (grace period %ds) from node %s: its drain passed the drain deadline %s (boundary ConfigMap data.drains) and the pod was still there (%s)",
		e.pod.Namespace, e.pod.Name, grace, node.Name, at.UTC().Format(time.RFC3339), why)
	return nil
}

// forceReason says why e's pod is deleted past the deadline, "" when it
// is not: its eviction was refused or failed, or it is terminating with
// more than DeadlineGracePeriod of its grace period left.
func forceReason(e *evicting, now time.Time) string {
	switch p := &e.pod; {
	case e.gone || e.forced:
		return ""
	case e.refused:
		return "eviction_refused"
	case e.refusal != "":
		return "eviction_failed"
	case p.DeletionTimestamp != nil && p.DeletionTimestamp.Sub(now) > DeadlineGracePeriod:
		return "terminating"
	}
	return ""
}

// warn records a Warning Event on node and, when it still exists, on
// group's InstanceGroup (the group whose drain it is; zero for a drain
// run outside the runner). Without a Recorder nothing is recorded.
func (d *Drainer) warn(ctx context.Context, group types.NamespacedName, node *corev1.Node, reason, note string, args ...any) {
	if d.Recorder == nil {
		return
	}
	d.Recorder.Eventf(node, nil, corev1.EventTypeWarning, reason, "Drain", note, args...)
	if group.Name == "" || d.Client == nil {
		return
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := d.Client.Get(ctx, group, ig); err == nil {
		d.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, reason, "Drain", note, args...)
	}
}
