package eksmanaged

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LabelNodegroup is the label EKS puts on the nodes of a managed node
// group: its name.
const LabelNodegroup = "eks.amazonaws.com/nodegroup"

// nodeCount counts the Nodes labelled as the node group's
// (LabelNodegroup) and those of them that are Ready (a Kubernetes list of
// Nodes with a label selector).
func nodeCount(ctx context.Context, nodes client.Reader, name string) (total, ready int, err error) {
	list := &corev1.NodeList{}
	if err := nodes.List(ctx, list, client.MatchingLabels{LabelNodegroup: name}); err != nil {
		return 0, 0, fmt.Errorf("listing the Nodes of EKS node group %s: %w", name, err)
	}
	for _, n := range list.Items {
		total++
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return total, ready, nil
}
