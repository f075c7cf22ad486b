package eksfargate

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// podTrustPolicy lets Fargate assume the pod execution role.
const podTrustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["eks-fargate-pods.amazonaws.com"]},"Action":["sts:AssumeRole"]}]}`

// policyPodExecution is the AWS managed policy of Fargate pod execution roles.
const policyPodExecution = "arn:aws:iam::aws:policy/AmazonEKSFargatePodExecutionRolePolicy"

// podRole is the pod execution role the group creates and owns when
// spec.eks-fargate.podExecutionRoleArn is empty.
func podRole(ig *v1alpha1.InstanceGroup) iamrole.OwnedRole {
	return iamrole.OwnedRole{
		Name: roleName(ig), Owner: ownership.OwnerOf(ig, ig.Spec.EKSFargate.ClusterName), TrustPolicy: podTrustPolicy,
		Description: "Pod execution role of the Fargate profile of InstanceGroup " + ownership.GroupTag(ig) + " (instance-manager)",
		Policies:    []string{policyPodExecution},
		Field:       specPath + ".podExecutionRoleArn", Hint: "set podExecutionRoleArn to its ARN to use it",
	}
}
