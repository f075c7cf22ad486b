package eks

import (
	"slices"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
)

func TestNodePolicies(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{ManagedPolicies: []string{"CloudWatchAgentServerPolicy", "arn:aws:iam::1:policy/custom"}})
	if slices.Contains(nodePolicies(ig, false), iamrole.PolicyCNI) {
		t.Error("AmazonEKS_CNI_Policy on a created node role without --node-role-cni-policy")
	}
	got := nodePolicies(ig, true)
	for _, want := range []string{iamrole.PolicyCNI, "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy", "arn:aws:iam::1:policy/custom"} {
		if !slices.Contains(got, want) {
			t.Errorf("policies %v lack %s", got, want)
		}
	}
	ig.Annotations = map[string]string{v1alpha1.AnnotationIRSAEnabled: "true"}
	if slices.Contains(nodePolicies(ig, true), iamrole.PolicyCNI) {
		t.Error("irsa-enabled keeps AmazonEKS_CNI_Policy on the node role")
	}
}
