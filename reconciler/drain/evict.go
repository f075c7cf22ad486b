package drain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	kubedrain "k8s.io/kubectl/pkg/drain"
)

// Bounds of the wait for pods that are already terminating: a graceful
// termination is waited for and never reported Blocked (only refused
// evictions are), and a kubelet that is gone does not hold a drain.
const (
	// UnreachablePodWait is how long a pod already terminating on a node
	// whose Ready condition is False or Unknown is waited for, counted from
	// its deletion request; past it the drain no longer waits for it: no
	// kubelet will finish it, and its controller has replaced it already
	// (a terminating pod is not available). Cluster API's
	// SkipWaitForDeleteTimeoutSeconds for unreachable nodes and
	// lifecycle-manager's drain-timeout-unknown (30s) do the same.
	UnreachablePodWait = 30 * time.Second
	// evictRetry is the time between two rounds of a drain step: refused
	// evictions are tried again, evicted pods read again.
	evictRetry = time.Second
)

// evicting is one pod a drain step evicts and waits for.
type evicting struct {
	pod corev1.Pod
	// refusal is why its last eviction was refused or failed ("" once
	// evicted); refused is true when it was refused (429: a
	// PodDisruptionBudget allows no disruption now), the only answer that
	// counts toward Blocked.
	refusal string
	refused bool
	gone    bool
	// forced: deleted past the drain deadline (deadline.go).
	forced bool
}

// Drain evicts the pods of a node that Start cordoned, for at most Step
// (a policy/v1 Eviction per pod, with the pod's own grace period; refused
// evictions are tried again every second within the step), and reports:
//
//   - Drained when no pod is left to evict: each was evicted and is gone
//     (deleted, or its name taken by a pod of another UID), or has
//     finished (phase Succeeded or Failed), or is a DaemonSet or mirror
//     pod. A pod already terminating on a node that is not Ready is not
//     waited for past UnreachablePodWait from its deletion request. The
//     node's pods are listed again before Drained, so a pod that arrived
//     meanwhile (one tolerating the cordon's taint) is evicted too.
//     Then, on a Ready node, its volumes are awaited (volumes.go:
//     Draining until its VolumeAttachments are detached, at most
//     VolumeDetachWait).
//   - Blocked, when no drain deadline applies (see DrainFor), once the
//     node has been draining (AnnotationDrainStarted) longer than Timeout
//     while an eviction is refused (HTTP 429
//     TooManyRequests: a PodDisruptionBudget allows no disruption now).
//     The message names the node and those pods. Nothing else counts:
//     a pod terminating, within its grace period or past it, is
//     "terminating"; another Eviction API error (such as the 500 for a
//     pod under two budgets) is retried and reported, not Blocked.
//   - Draining otherwise, with what it waits for.
//
// Errors name the node: its pods could not be listed or read.
//
// Drain is DrainFor a drain of no group: the cluster's deadline applies.
func (d *Drainer) Drain(ctx context.Context, node *corev1.Node) (DrainResult, string, error) {
	return d.DrainFor(ctx, types.NamespacedName{}, node)
}

// DrainFor is one drain step (see Drain) of node, a node of group, bounded
// by the admin's drain deadline for group (Deadline, counted from the
// node's AnnotationDrainStarted):
//
//   - Until the deadline every pod leaves through the Eviction API.
//   - Past it, a pod whose eviction is refused (429) or fails is deleted
//     instead, and a pod still terminating with more than
//     DeadlineGracePeriod of its grace period left is deleted again with
//     that cap; each deletion is a Warning Event (ReasonDrainDeadline) on
//     the node and on group's InstanceGroup, and counts in
//     instance_manager_drain_deadline_pods_deleted_total. Such a drain is
//     never Blocked.
//   - Pods that tolerate the cordon and came back to the node after their
//     workload had MaxArrivalEvictions of them evicted (or after the
//     deadline) are left on it, with a Warning (ReasonDrainPodsLeft):
//     nothing keeps them off the node, so the drain ends instead of
//     evicting them in a loop.
func (d *Drainer) DrainFor(ctx context.Context, group types.NamespacedName, node *corev1.Node) (DrainResult, string, error) {
	stepCtx, cancel := context.WithTimeout(ctx, d.Step)
	defer cancel()
	helper := d.helper(stepCtx, node)
	deadline := d.deadlineAt(group, node)
	pods, err := remaining(helper, node)
	if err != nil {
		return Draining, "", err
	}
	pods = d.leave(ctx, group, node, pods, d.past(deadline))
	if len(pods) == 0 {
		return d.detached(stepCtx, node, Drained, "", nil)
	}
	if d.DryRun != nil {
		// Evictions with dryRun=All: the helper prints one line per pod
		// and nothing leaves, so there is nothing to wait for.
		if err := helper.DeleteOrEvictPods(pods); err != nil {
			return Draining, err.Error(), nil
		}
		return Drained, "", nil
	}
	batch := make([]*evicting, len(pods))
	for i := range pods {
		batch[i] = &evicting{pod: pods[i]}
	}
	b := bound{group: group, deadline: deadline}
	for {
		left, err := d.round(stepCtx, helper, node, batch, b)
		switch {
		case err != nil && stepCtx.Err() == nil:
			return Draining, "", err
		case err != nil: // the step's time is up
			return d.verdict(node, batch, deadline)
		case left == 0:
			res, msg, err := relist(stepCtx, helper, node, batch)
			return d.detached(stepCtx, node, res, msg, err)
		case !d.sleep(stepCtx):
			return d.verdict(node, batch, deadline)
		}
	}
}

// bound is what a drain step needs to apply the admin's deadline: whose
// drain it is (for Events) and when the deadline passes (zero: never).
type bound struct {
	group    types.NamespacedName
	deadline time.Time
}

// past reports whether deadline (zero: none) has passed.
func (d *Drainer) past(deadline time.Time) bool {
	return !deadline.IsZero() && !d.Now().Before(deadline)
}

// relist ends a step whose pods (batch) are all gone: Drained, unless
// pods arrived on the node meanwhile (they are evicted by the next step).
// An arrival that tolerates the cordon's taint
// (node.kubernetes.io/unschedulable:NoSchedule, e.g. a toleration of every
// taint) does not hold the drain: the scheduler may put its replacement
// back on this node each time it is evicted (the node is the emptiest), so
// evicting it again could never end a rotation; it goes with the node, as
// with kubectl drain. A delete reads the node's pods again before the
// instance goes (Remaining), whatever they tolerate.
func relist(ctx context.Context, h *kubedrain.Helper, node *corev1.Node, batch []*evicting) (DrainResult, string, error) {
	pods, err := remaining(h, node)
	evicted := map[types.UID]bool{}
	for _, e := range batch {
		evicted[e.pod.UID] = true
	}
	pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return !evicted[p.UID] && toleratesCordon(&p) })
	switch {
	case err != nil && ctx.Err() != nil:
		return Draining, "", nil
	case err != nil:
		return Draining, "", err
	case len(pods) > 0:
		return Draining, fmt.Sprintf("pods arrived on cordoned node %s while it drained: %s", node.Name, podNames(pods)), nil
	}
	return Drained, "", nil
}

// Remaining returns the pods a drain of node would still evict (as Drain
// lists them: not DaemonSet or mirror pods, not finished, not abandoned
// on an unreachable node, not left on it because they tolerate the
// cordon and kept coming back, see DrainFor), read from the API server:
// none means every pod of the node was evicted and is gone, or has
// finished. Errors name the node.
func (d *Drainer) Remaining(ctx context.Context, node *corev1.Node) ([]corev1.Pod, error) {
	return d.RemainingFor(ctx, types.NamespacedName{}, node)
}

// RemainingFor is Remaining for a node of group: pods left on the node
// for the first time are named in a Warning Event on the node and on
// group's InstanceGroup (ReasonDrainPodsLeft), and past group's drain
// deadline every pod that tolerates the cordon and arrived during the
// drain is left.
func (d *Drainer) RemainingFor(ctx context.Context, group types.NamespacedName, node *corev1.Node) ([]corev1.Pod, error) {
	pods, err := remaining(d.helper(ctx, node), node)
	if err != nil {
		return nil, err
	}
	return d.leave(ctx, group, node, pods, d.past(d.deadlineAt(group, node))), nil
}

// helper is the Kubernetes drain helper for one step on node: evictions
// with the pods' own grace periods, DaemonSet pods skipped, pods with
// emptyDir data and pods without a controller evicted, and settled pods
// (finished, or abandoned on an unreachable node) left alone.
func (d *Drainer) helper(ctx context.Context, node *corev1.Node) *kubedrain.Helper {
	h := &kubedrain.Helper{
		Ctx: ctx, Client: d.Kube,
		IgnoreAllDaemonSets: true, DeleteEmptyDirData: true, Force: true,
		GracePeriodSeconds: -1, Timeout: d.Step, EvictErrorRetryDelay: d.retryEvery(),
		Out: io.Discard, ErrOut: io.Discard,
		AdditionalFilters: []kubedrain.PodFilter{func(pod corev1.Pod) kubedrain.PodDeleteStatus {
			if settled(node, &pod, d.Now()) {
				return kubedrain.MakePodDeleteStatusSkip()
			}
			return kubedrain.MakePodDeleteStatusOkay()
		}},
	}
	if d.DryRun != nil {
		h.DryRunStrategy, h.Out = cmdutil.DryRunServer, d.DryRun
	}
	return h
}

func remaining(h *kubedrain.Helper, node *corev1.Node) ([]corev1.Pod, error) {
	list, errs := h.GetPodsForDeletion(node.Name)
	if len(errs) > 0 {
		return nil, fmt.Errorf("listing pods to evict from node %s: %v", node.Name, errs)
	}
	return list.Pods(), nil
}

// round tries the eviction of each pod not yet evicted and reads each one
// evicted or terminating; it returns how many are not gone. Past b's
// deadline it deletes the pods it could not evict (force). An error of
// the step's context ending is returned as is.
func (d *Drainer) round(ctx context.Context, h *kubedrain.Helper, node *corev1.Node, batch []*evicting, b bound) (int, error) {
	left := 0
	for _, e := range batch {
		if e.gone {
			continue
		}
		if e.pod.DeletionTimestamp == nil && !e.forced {
			err := h.EvictPod(e.pod, policyv1.SchemeGroupVersion)
			if ctx.Err() != nil {
				return left, ctx.Err()
			}
			e.gone, e.refusal = judgeEviction(err)
			e.refused = e.refusal != "" && apierrors.IsTooManyRequests(err)
			if err == nil {
				d.arrivals.evicted(node, &e.pod)
			}
		}
		if why := forceReason(e, d.Now()); why != "" && d.past(b.deadline) {
			if err := d.force(ctx, b.group, node, e, why, b.deadline); err != nil {
				return left, err
			}
			e.refusal, e.refused = "", false
		}
		if e.gone {
			continue
		}
		if e.refusal != "" {
			left++
			continue
		}
		p, err := d.Kube.CoreV1().Pods(e.pod.Namespace).Get(ctx, e.pod.Name, metav1.GetOptions{})
		switch {
		case ctx.Err() != nil:
			return left, ctx.Err()
		case apierrors.IsNotFound(err) || err == nil && p.UID != e.pod.UID:
			e.gone = true
			continue
		case err != nil:
			return left, fmt.Errorf("reading pod %s/%s evicted from node %s: %w", e.pod.Namespace, e.pod.Name, node.Name, err)
		}
		e.pod = *p
		if settled(node, p, d.Now()) {
			e.gone = true
			continue
		}
		left++
	}
	return left, nil
}

// judgeEviction reads the API server's answer to one pod's eviction:
// gone when the pod no longer exists (404: nothing to wait for); refusal
// is why it was refused (429: a PodDisruptionBudget allows no disruption
// now; or any other error), "" when it was accepted or the pod's
// namespace is being deleted (which deletes the pod).
func judgeEviction(err error) (gone bool, refusal string) {
	switch {
	case err == nil:
		return false, ""
	case apierrors.IsNotFound(err):
		return true, ""
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return false, ""
	}
	return false, err.Error()
}

// EvictUnbound evicts a pod bound to no node (policy/v1 Eviction, so a
// PodDisruptionBudget is honoured) and judges the answer as a drain does
// (judgeEviction): gone, or why it was refused ("" when accepted). A pod
// already terminating is not evicted again. With DryRun the eviction is
// a server dry run (nothing leaves).
func (d *Drainer) EvictUnbound(ctx context.Context, pod *corev1.Pod) (gone bool, refusal string) {
	if pod.DeletionTimestamp != nil {
		return false, ""
	}
	h := d.helper(ctx, &corev1.Node{})
	return judgeEviction(h.EvictPod(*pod, policyv1.SchemeGroupVersion))
}

// verdict is the outcome of a step that ends with pods left (see Drain).
func (d *Drainer) verdict(node *corev1.Node, batch []*evicting, deadline time.Time) (DrainResult, string, error) {
	now := d.Now()
	var blocking, waiting []string
	for _, e := range batch {
		name := e.pod.Namespace + "/" + e.pod.Name
		switch p := &e.pod; {
		case e.gone:
		case e.forced:
			waiting = append(waiting, name+": deleted past the drain deadline, terminating")
		case e.refused:
			blocking = append(blocking, fmt.Sprintf("%s: eviction refused: %s", name, e.refusal))
		case e.refusal != "":
			waiting = append(waiting, fmt.Sprintf("%s: eviction failed (retried; not a budget refusal): %s", name, e.refusal))
		case p.DeletionTimestamp == nil:
			waiting = append(waiting, name+": its namespace is being deleted")
		case now.After(p.DeletionTimestamp.Time):
			waiting = append(waiting, fmt.Sprintf("%s: terminating, still there %s after its grace period ended (%s)",
				name, now.Sub(p.DeletionTimestamp.Time).Round(time.Second), p.DeletionTimestamp.UTC().Format(time.RFC3339)))
		default:
			waiting = append(waiting, fmt.Sprintf("%s: terminating, its grace period ends %s", name, p.DeletionTimestamp.UTC().Format(time.RFC3339)))
		}
	}
	msg := strings.Join(append(blocking, waiting...), "; ")
	if !deadline.IsZero() {
		// The admin's deadline bounds the drain: it is never Blocked.
		return Draining, strings.TrimPrefix(fmt.Sprintf("%s; the drain deadline deletes what is left at %s", msg, deadline.UTC().Format(time.RFC3339)), "; "), nil
	}
	started, err := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainStarted])
	if err == nil && now.Sub(started) > d.Timeout && len(blocking) > 0 {
		return Blocked, fmt.Sprintf("node %s could not be drained within %s: %s", node.Name, d.Timeout, msg), nil
	}
	return Draining, msg, nil
}

// settled reports whether pod needs no eviction nor wait: it has finished,
// or it has been terminating on a node that is not Ready for longer than
// UnreachablePodWait since its deletion was requested.
func settled(node *corev1.Node, pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if pod.DeletionTimestamp == nil || NodeReady(node) {
		return false
	}
	requested := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		requested = requested.Add(-time.Duration(*g) * time.Second)
	}
	return now.Sub(requested) > UnreachablePodWait
}

// sleep waits one retry interval; false when ctx ends first.
func (d *Drainer) sleep(ctx context.Context) bool {
	t := time.NewTimer(d.retryEvery())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (d *Drainer) retryEvery() time.Duration {
	if d.retry > 0 {
		return d.retry
	}
	return evictRetry
}

func podNames(pods []corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return strings.Join(names, ", ")
}

// cordonTaint is the taint a cordoned node carries (the node lifecycle
// controller adds it for spec.unschedulable).
var cordonTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// toleratesCordon reports whether pod may be scheduled onto a cordoned
// node.
func toleratesCordon(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(logr.Discard(), &cordonTaint, false) })
}
