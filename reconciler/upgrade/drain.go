package upgrade

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node annotations that carry a rotation across reconciles and restarts.
const (
	// AnnotationDrainStarted (RFC 3339 time) marks a node this controller
	// cordoned and is draining for a rotation.
	AnnotationDrainStarted = "instancemgr.keikoproj.io/drain-started"
	// AnnotationDrainSkippedUntil (RFC 3339 time) marks a node whose drain
	// was blocked (by a PodDisruptionBudget) and is left alone until then.
	AnnotationDrainSkippedUntil = "instancemgr.keikoproj.io/drain-skipped-until"
	// AnnotationSurge ("true") marks a node drained after a maxSurge
	// scale-out: its instance is terminated with a capacity decrement.
	AnnotationSurge = "instancemgr.keikoproj.io/surge"
	// AnnotationScaleDownDisabled is the cluster-autoscaler's: it never
	// picks a node carrying it ("true") for scale-down. A node being
	// rotated carries it from its cordon until its instance is gone, so the
	// autoscaler does not terminate it (with a decrement) while the rotation
	// replaces it without one.
	AnnotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// annotationScaleDownDisabledByRotation ("true") records that the
	// rotation set AnnotationScaleDownDisabled, so that only then is it
	// removed again (a skipped node); one set by someone else stays.
	annotationScaleDownDisabledByRotation = "instancemgr.keikoproj.io/scale-down-disabled-by-rotation"
)

// DrainResult is the outcome of one drain step.
type DrainResult int

const (
	// Draining: evictions are under way or were refused for now (429).
	Draining DrainResult = iota
	// Drained: no pod that needs evicting is left on the node.
	Drained
	// Blocked: the node has been draining longer than the drain timeout.
	Blocked
)

// Drainer cordons nodes and evicts their pods through the Eviction API with
// the Kubernetes drain helper (k8s.io/kubectl/pkg/drain), so
// PodDisruptionBudgets are honoured; DaemonSet pods are skipped, pods with
// emptyDir data are evicted. It never deletes pods directly.
type Drainer struct {
	Kube   kubernetes.Interface
	Client client.Client
	// Timeout is how long a node may drain before it is reported Blocked.
	Timeout time.Duration
	// Step bounds how long one call to Drain may wait for evictions, so a
	// reconcile is never held for the whole drain.
	Step time.Duration
	// Now returns the current time (tests).
	Now func() time.Time
	// DryRun, when set, makes evictions with dryRun=All (nothing is
	// evicted) and gets a line per eviction ("evicting pod <ns>/<name>
	// (server dry run)"): the manager's --dry-run.
	DryRun io.Writer
}

// Start cordons node and marks the drain start (and, with surge, that its
// instance gives its capacity back) and that the cluster-autoscaler must
// not scale it down. Errors come from the API server.
func (d *Drainer) Start(ctx context.Context, node *corev1.Node, surge bool) error {
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = true
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	if _, ok := node.Annotations[AnnotationDrainStarted]; !ok {
		node.Annotations[AnnotationDrainStarted] = d.Now().UTC().Format(time.RFC3339)
	}
	delete(node.Annotations, AnnotationDrainSkippedUntil)
	if _, ok := node.Annotations[AnnotationScaleDownDisabled]; !ok {
		node.Annotations[AnnotationScaleDownDisabled] = "true"
		node.Annotations[annotationScaleDownDisabledByRotation] = "true"
	}
	if surge {
		node.Annotations[AnnotationSurge] = "true"
	}
	if err := d.Client.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("cordoning node %s: %w", node.Name, err)
	}
	return nil
}

// Drain evicts the pods of a node that Start cordoned, waiting at most Step.
// It returns Drained when nothing is left to evict, Blocked once the node
// has been draining longer than Timeout, else Draining. The error names the
// node and the pods that could not be listed or evicted.
func (d *Drainer) Drain(ctx context.Context, node *corev1.Node) (DrainResult, string, error) {
	stepCtx, cancel := context.WithTimeout(ctx, d.Step)
	defer cancel()
	helper := &drain.Helper{
		Ctx: stepCtx, Client: d.Kube,
		IgnoreAllDaemonSets: true, DeleteEmptyDirData: true, Force: true,
		GracePeriodSeconds: -1, Timeout: d.Step, EvictErrorRetryDelay: time.Second,
		Out: io.Discard, ErrOut: io.Discard,
	}
	if d.DryRun != nil {
		helper.DryRunStrategy, helper.Out = cmdutil.DryRunServer, d.DryRun
	}
	list, errs := helper.GetPodsForDeletion(node.Name)
	if len(errs) > 0 {
		return Draining, "", fmt.Errorf("listing pods to evict from node %s: %v", node.Name, errs)
	}
	pods := list.Pods()
	if len(pods) == 0 {
		return Drained, "", nil
	}
	err := helper.DeleteOrEvictPods(pods)
	if err == nil {
		return Drained, "", nil
	}
	started, perr := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainStarted])
	if perr == nil && d.Now().Sub(started) > d.Timeout {
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		return Blocked, fmt.Sprintf("node %s could not be drained within %s (pods %s): %v",
			node.Name, d.Timeout, strings.Join(names, ", "), err), nil
	}
	return Draining, err.Error(), nil
}

// Skip uncordons a blocked node and leaves it alone for one drain timeout,
// so the rotation moves on to other nodes instead of forcing this one.
func (d *Drainer) Skip(ctx context.Context, node *corev1.Node) error {
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = false
	delete(node.Annotations, AnnotationDrainStarted)
	delete(node.Annotations, AnnotationSurge)
	if node.Annotations[annotationScaleDownDisabledByRotation] == "true" {
		delete(node.Annotations, AnnotationScaleDownDisabled)
		delete(node.Annotations, annotationScaleDownDisabledByRotation)
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationDrainSkippedUntil] = d.Now().Add(d.Timeout).UTC().Format(time.RFC3339)
	if err := d.Client.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("uncordoning blocked node %s: %w", node.Name, err)
	}
	return nil
}

// skipped reports whether node is in its skip window.
func (d *Drainer) skipped(node *corev1.Node) bool {
	until, err := time.Parse(time.RFC3339, node.Annotations[AnnotationDrainSkippedUntil])
	return err == nil && d.Now().Before(until)
}

// draining reports whether node was cordoned for a rotation.
func draining(node *corev1.Node) bool {
	_, ok := node.Annotations[AnnotationDrainStarted]
	return ok
}
