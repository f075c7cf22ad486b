package eks

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

func eksGroup(c v1alpha1.EKSConfiguration) *v1alpha1.InstanceGroup {
	ig := &v1alpha1.InstanceGroup{}
	ig.Namespace, ig.Name = "team-a", "web"
	c.ClusterName = "prod"
	ig.Spec.EKS = &v1alpha1.EKSSpec{MinSize: 1, MaxSize: 3, Configuration: &c}
	return ig
}

func TestLaunchTemplateData(t *testing.T) {
	in := launchInput{imageID: "ami-1", profileName: "prof", securityGroups: []string{"sg-1"}, userData: "#!/bin/bash"}
	t.Run("volumes and spot price", func(t *testing.T) {
		ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "m5.large", KeyPairName: "kp", SpotPrice: "0.67",
			Volumes: []v1alpha1.NodeVolume{{Name: "/dev/xvda", Type: "gp3", Size: 50, Iops: 3000, Encrypted: ptr.To(true)}}})
		d := launchTemplateData(ig, in)
		if awssdk.ToString(d.ImageId) != "ami-1" || d.InstanceType != "m5.large" || awssdk.ToString(d.KeyName) != "kp" {
			t.Fatalf("basics: %+v", d)
		}
		if d.InstanceMarketOptions == nil || awssdk.ToString(d.InstanceMarketOptions.SpotOptions.MaxPrice) != "0.67" {
			t.Errorf("spot price not requested: %+v", d.InstanceMarketOptions)
		}
		ebs := d.BlockDeviceMappings[0].Ebs
		if awssdk.ToInt32(ebs.VolumeSize) != 50 || ebs.VolumeType != ec2types.VolumeTypeGp3 || !awssdk.ToBool(ebs.DeleteOnTermination) || !awssdk.ToBool(ebs.Encrypted) {
			t.Errorf("volume: %+v", ebs)
		}
	})
	t.Run("a mixed instances policy carries the spot settings instead", func(t *testing.T) {
		ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "m5.large", SpotPrice: "0.67",
			MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{InstancePool: "SubFamilyFlexible"}})
		if d := launchTemplateData(ig, in); d.InstanceMarketOptions != nil {
			t.Errorf("spot market options with a mixed instances policy: %+v", d.InstanceMarketOptions)
		}
	})
	t.Run("the data hash follows the data", func(t *testing.T) {
		ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "m5.large"})
		a, b := launchDataOf(ig, in).description(), launchDataOf(ig, in).description()
		if a != b {
			t.Errorf("same data, different hashes: %s %s", a, b)
		}
		ig.Spec.EKS.Configuration.InstanceType = "m5.xlarge"
		if c := launchDataOf(ig, in).description(); c == a {
			t.Errorf("changed instance type, same hash %s", c)
		}
	})
}

func TestGroupTags(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{
		Labels: map[string]string{"team": "a"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
		Tags: []map[string]string{{"key": "cost-center", "value": "42"}},
	})
	tags := groupTags(ig, "prod-team-a-web")
	for k, v := range map[string]string{
		"Name": "prod-team-a-web", ownership.TagInstanceGroup: "team-a/web", "kubernetes.io/cluster/prod": "owned",
		"instancemgr.keikoproj.io/cluster/prod": "owned", "cost-center": "42",
	} {
		if tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, tags[k], v)
		}
	}
	if _, ok := tags["k8s.io/cluster-autoscaler/enabled"]; ok {
		t.Error("cluster-autoscaler tags without the annotation")
	}
	ig.Annotations = map[string]string{v1alpha1.AnnotationClusterAutoscalerEnabled: "true"}
	tags = groupTags(ig, "prod-team-a-web")
	for k, v := range map[string]string{
		"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned",
		"k8s.io/cluster-autoscaler/node-template/label/team":      "a",
		"k8s.io/cluster-autoscaler/node-template/taint/dedicated": "web:NoSchedule",
		// The group's own labels, which workloads select it by, so a group
		// at zero is scaled up for them too.
		"k8s.io/cluster-autoscaler/node-template/label/" + v1alpha1.LabelInstanceGroup:          "web",
		"k8s.io/cluster-autoscaler/node-template/label/" + v1alpha1.LabelInstanceGroupNamespace: "team-a",
		// The default root volume (32 GiB) as ephemeral storage.
		"k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage": "32Gi",
	} {
		if tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, tags[k], v)
		}
	}
	ig.Spec.EKS.Configuration.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdb", Size: 500}, {Name: "/dev/xvda", Size: 80}}
	if got := groupTags(ig, "g")["k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"]; got != "80Gi" {
		t.Errorf("ephemeral-storage with a root volume of 80 GiB = %q, want 80Gi", got)
	}
}

func TestLifecycleOf(t *testing.T) {
	cases := []struct {
		c    v1alpha1.EKSConfiguration
		want string
	}{
		{v1alpha1.EKSConfiguration{}, v1alpha1.LifecycleNormal},
		{v1alpha1.EKSConfiguration{SpotPrice: "0.1"}, v1alpha1.LifecycleSpot},
		{v1alpha1.EKSConfiguration{MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{}}, v1alpha1.LifecycleNormal},
	}
	for _, tc := range cases {
		if got := lifecycleOf(eksGroup(tc.c)); got != tc.want {
			t.Errorf("lifecycleOf(%+v) = %s, want %s", tc.c, got, tc.want)
		}
	}
}
