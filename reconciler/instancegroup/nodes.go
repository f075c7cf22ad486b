package instancegroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/providers"
)

// groupNodes returns the group's Nodes by providerID (see matchNodes).
func (r *Reconciler) groupNodes(ctx context.Context, obs *providers.Observation) (map[string]*corev1.Node, error) {
	if len(obs.Instances) == 0 {
		return map[string]*corev1.Node{}, nil
	}
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return matchNodes(obs.Instances, list.Items), nil
}

// matchNodes maps each instance's providerID to its Node. A kubelet chooses
// its providerID, so where EC2 gave the instance's private DNS name the
// Node must also carry that name (what the node's credentials are bound
// to); an impostor claiming another instance's providerID is never taken
// for it.
func matchNodes(instances []providers.Instance, nodes []corev1.Node) map[string]*corev1.Node {
	want := map[string]providers.Instance{}
	for _, in := range instances {
		want[in.ProviderID] = in
	}
	out := map[string]*corev1.Node{}
	for i := range nodes {
		n := &nodes[i]
		in, ok := want[n.Spec.ProviderID]
		if !ok || (in.PrivateDNSName != "" && n.Name != in.PrivateDNSName) {
			continue
		}
		out[n.Spec.ProviderID] = n
	}
	return out
}
