package instancegroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// inGrace returns the pod, among those on the named nodes (whose drains
// run), that is terminating inside its termination grace period with the
// latest end ("namespace/name (its grace period ends <RFC 3339>)"), or ""
// when there is none. Such a drain is progressing: the kubelet is
// stopping the pod and it leaves by the end of its grace period (its
// deletionTimestamp, which the API server sets to the deletion time plus
// the grace period), so the stall timeout does not release it, whatever
// terminationGracePeriodSeconds says (review N14: a one-hour grace period
// outlasts the 30-minute default, and a release would evict the
// rescheduled pod again). A pod still there after its grace period ended
// does not count. Pods are read from the API server (the drainer's
// client), one list per node; errors name the node.
func (r *Reconciler) inGrace(ctx context.Context, nodes []string, now time.Time) (string, error) {
	if r.Rolling == nil || r.Rolling.Drainer == nil || r.Rolling.Drainer.Kube == nil {
		return "", nil
	}
	found, until := "", time.Time{}
	for _, name := range nodes {
		list, err := r.Rolling.Drainer.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
		if err != nil {
			return "", fmt.Errorf("listing the pods of node %s being drained: %w", name, err)
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != name || p.DeletionTimestamp == nil || !p.DeletionTimestamp.Time.After(now) || !p.DeletionTimestamp.Time.After(until) {
				continue
			}
			until = p.DeletionTimestamp.Time
			found = fmt.Sprintf("%s/%s (its grace period ends %s)", p.Namespace, p.Name, until.UTC().Format(time.RFC3339))
		}
	}
	return found, nil
}

// drainingNodes names the nodes of nodes (a group's, by provider id) that
// carry the drain annotation (drain.AnnotationDrainStarted).
func drainingNodes(nodes map[string]*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if drain.Marked(n) {
			out = append(out, n.Name)
		}
	}
	return out
}
