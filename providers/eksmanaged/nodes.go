package eksmanaged

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/providers"
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

// drainBeforeDelete drains, through the controller's drain path
// (providers.Disruptions.DrainNodes of label LabelNodegroup, paced by the
// group's maxUnavailable), the Nodes of each node group about to be
// deleted that is not already DELETING. It returns what is still waited
// for and what drain is blocked (both empty once every node group's Nodes
// are drained: DeleteNodegroup may then be sent); an error names the node
// group whose drain failed. Without Disruptions in ctx (a provisioner
// unit test) nothing is drained.
func drainBeforeDelete(ctx context.Context, groups []*ekstypes.Nodegroup) (waits, blocks []string, err error) {
	d := providers.DisruptionsFrom(ctx)
	if d == nil {
		return nil, nil, nil
	}
	for _, ng := range groups {
		if ng.Status == ekstypes.NodegroupStatusDeleting {
			continue
		}
		name := awssdk.ToString(ng.NodegroupName)
		r, err := d.DrainNodes(ctx, LabelNodegroup, name)
		if err != nil {
			return nil, nil, fmt.Errorf("draining the nodes of EKS node group %s before deleting it: %w", name, err)
		}
		if !r.Done {
			waits = append(waits, r.Message)
			blocks = append(blocks, nonEmpty(r.Blocked)...)
		}
	}
	return waits, blocks, nil
}
