package instancegroup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func TestMatchNodesNeedsTheInstancesName(t *testing.T) {
	node := func(name, providerID string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	instances := []providers.Instance{
		{ID: "i-1", ProviderID: "aws:///a/i-1", PrivateDNSName: "ip-10-0-0-1.ec2.internal"},
		{ID: "i-2", ProviderID: "aws:///a/i-2"}, // name unknown: providerID alone
	}
	// The impostor comes first in the list, as list order is arbitrary.
	nodes := []corev1.Node{
		node("ip-10-9-9-9.ec2.internal", "aws:///a/i-1"),
		node("ip-10-0-0-1.ec2.internal", "aws:///a/i-1"),
		node("ip-10-0-0-2.ec2.internal", "aws:///a/i-2"),
		node("ip-10-0-0-3.ec2.internal", "aws:///a/i-3"),
	}
	got := matchNodes(instances, nodes)
	if len(got) != 2 || got["aws:///a/i-1"].Name != "ip-10-0-0-1.ec2.internal" || got["aws:///a/i-2"].Name != "ip-10-0-0-2.ec2.internal" {
		t.Errorf("matchNodes = %v", got)
	}
	if got := matchNodes(instances[:1], nodes[:1]); len(got) != 0 {
		t.Errorf("an impostor alone was matched: %v", got)
	}
}

// A Node enqueues the one group that owns it: by the group's labels, or,
// without them, by its provider id among the instances groups observed.
func TestNodeGroupMapsANodeToItsOwner(t *testing.T) {
	r := &Reconciler{}
	web := types.NamespacedName{Namespace: "team-a", Name: "web"}
	r.owners.set(web, []providers.Instance{{ProviderID: "aws:///a/i-1"}, {ProviderID: "aws:///a/i-2"}})
	node := func(labels map[string]string, providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	ctx := context.Background()
	labelled := node(map[string]string{v1alpha1.LabelInstanceGroup: "db", v1alpha1.LabelInstanceGroupNamespace: "team-b"}, "aws:///a/i-9")
	if got := r.nodeGroup(ctx, labelled); len(got) != 1 || got[0].NamespacedName != (types.NamespacedName{Namespace: "team-b", Name: "db"}) {
		t.Errorf("labelled node mapped to %v", got)
	}
	if got := r.nodeGroup(ctx, node(nil, "aws:///a/i-2")); len(got) != 1 || got[0].NamespacedName != web {
		t.Errorf("unlabelled node of web's instance mapped to %v", got)
	}
	if got := r.nodeGroup(ctx, node(nil, "aws:///a/i-3")); len(got) != 0 {
		t.Errorf("a node of no group's instance mapped to %v", got)
	}

	// The group replaced an instance, then was deleted.
	r.owners.set(web, []providers.Instance{{ProviderID: "aws:///a/i-2"}, {ProviderID: "aws:///a/i-3"}})
	if got := r.nodeGroup(ctx, node(nil, "aws:///a/i-1")); len(got) != 0 {
		t.Errorf("the node of a replaced instance mapped to %v", got)
	}
	if got := r.nodeGroup(ctx, node(nil, "aws:///a/i-3")); len(got) != 1 {
		t.Errorf("the node of the replacement mapped to %v", got)
	}
	r.owners.forget(web)
	if got := r.nodeGroup(ctx, node(nil, "aws:///a/i-3")); len(got) != 0 {
		t.Errorf("a node of a deleted group mapped to %v", got)
	}
}
