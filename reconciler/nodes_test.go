package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
