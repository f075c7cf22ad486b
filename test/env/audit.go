package env

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Loss is an instance the bridge saw go (terminated, shutting down or gone)
// while its Node still held pods that had not been drained: a pod not
// evicted (no deletion under way), not finished (Succeeded or Failed), not
// a DaemonSet's or a mirror pod, and not one that tolerates the cordon and
// was created after the drain began (it would come straight back however
// often it is evicted; the Node's drain-started annotation, RFC 3339, says
// when the drain began). Every such pod lost its graceful termination and
// PodDisruptionBudget with the instance: the one promise a node lifecycle
// manager must keep.
type Loss struct {
	// At is when the bridge saw the instance gone.
	At time.Time
	// Instance is the EC2 instance id; Node the Node's name.
	Instance, Node string
	// Group is the Auto Scaling group the instance belonged to when its
	// Node registered.
	Group string
	// Pods are the undrained pods, as namespace/name.
	Pods []string
}

func (l Loss) String() string {
	return fmt.Sprintf("%s: instance %s (Auto Scaling group %s) went with %d undrained pod(s) on Node %s: %s",
		l.At.UTC().Format(time.RFC3339), l.Instance, l.Group, len(l.Pods), l.Node, strings.Join(l.Pods, ", "))
}

// Losses returns every Loss the bridge recorded since it started, oldest
// first (a copy).
func (b *Bridge) Losses() []Loss {
	b.auditMu.Lock()
	defer b.auditMu.Unlock()
	return slices.Clone(b.losses)
}

// Forgive drops the recorded losses of instance id and records none for it
// from now on: a test that takes an instance away the old way on purpose
// (to show the audit catches it) says so.
func (b *Bridge) Forgive(id string) {
	b.auditMu.Lock()
	defer b.auditMu.Unlock()
	if b.forgiven == nil {
		b.forgiven = map[string]bool{}
	}
	b.forgiven[id] = true
	b.losses = slices.DeleteFunc(b.losses, func(l Loss) bool { return l.Instance == id })
}

// audit records a Loss when node, whose instance id is gone, still holds
// undrained pods. Called before the Node is deleted; a failed pod list is
// returned (the removal is retried at the next sync, and so is the audit).
func (b *Bridge) audit(ctx context.Context, node *corev1.Node, id string) error {
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()})
	if err != nil {
		return fmt.Errorf("list the pods of Node %s (audit): %w", node.Name, err)
	}
	var undrained []string
	for i := range pods.Items {
		if p := &pods.Items[i]; !drained(p, node) {
			undrained = append(undrained, p.Namespace+"/"+p.Name)
		}
	}
	if len(undrained) == 0 {
		return nil
	}
	b.auditMu.Lock()
	defer b.auditMu.Unlock()
	if b.forgiven[id] {
		return nil
	}
	l := Loss{At: time.Now(), Instance: id, Node: node.Name, Group: node.Annotations[BridgeGroupAnnotation], Pods: undrained}
	b.losses = append(b.losses, l)
	b.log.Info("AUDIT: an instance went with undrained pods", "loss", l.String())
	return nil
}

// drainStartedAnnotation is the product's record of when it cordoned a
// node to drain it (reconciler/drain.AnnotationDrainStarted, RFC 3339).
const drainStartedAnnotation = "instancemgr.keikoproj.io/drain-started"

// drained reports whether p needs no drain before node goes: it is being
// deleted (evicted), has finished, is a mirror or DaemonSet pod, or
// tolerates the cordon's taint and arrived after node's drain began.
func drained(p *corev1.Pod, node *corev1.Node) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	// Judged here, not with the product's own code: the audit is the
	// product's independent check.
	began, err := time.Parse(time.RFC3339, node.Annotations[drainStartedAnnotation])
	if !node.Spec.Unschedulable || err != nil || p.CreationTimestamp.Time.Before(began) {
		return false
	}
	cordon := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	return slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(logr.Discard(), &cordon, false) })
}
