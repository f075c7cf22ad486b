package webhooks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func validEKS() *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{Spec: v1alpha1.InstanceGroupSpec{
		Provisioner: v1alpha1.ProvisionerEKS,
		Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate},
		EKS: &v1alpha1.EKSSpec{MinSize: 1, MaxSize: 3, Configuration: &v1alpha1.EKSConfiguration{
			ClusterName: "prod", Image: "ami-0123456789abcdef0", InstanceType: "m5.large",
			Subnets: []string{"subnet-1"}, SecurityGroups: []string{"sg-1"},
		}},
	}}
}

func TestValidateInstanceGroup(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.InstanceGroup)
		want   []string // substrings of the error; none = valid
	}{
		{"valid", func(*v1alpha1.InstanceGroup) {}, nil},
		{"warm pool", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 1, MaxSize: -1}
		}, nil},
		{"warm pool on windows", func(ig *v1alpha1.InstanceGroup) {
			ig.Annotations = map[string]string{v1alpha1.AnnotationOSFamily: v1alpha1.OSFamilyWindows}
			ig.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 1, MaxSize: -1}
		}, []string{"spec.eks.warmPool", "Start-EKSBootstrap.ps1", "use an amazonlinux2, amazonlinux2023 or bottlerocket group"}},
		{"warm pool with spot price", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.SpotPrice = "0.5"
			ig.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 1, MaxSize: -1}
		}, []string{"spec.eks.warmPool", "Spot Instances (spotPrice)"}},
		{"image latest", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Image = "latest" }, nil},
		{"image ssm", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Image = "ssm://my/ami" }, nil},
		{"bad image", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Image = "ubuntu" }, []string{"spec.eks.configuration.image"}},
		{"min > max", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.MinSize = 5 }, []string{"spec.eks.minSize", "maxSize (3)"}},
		{"no provisioner names the rest too", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = ""
			ig.Spec.EKS.Configuration.ClusterName = ""
		}, []string{"spec.provisioner", "spec.eks.configuration.clusterName"}},
		{"unknown provisioner", func(ig *v1alpha1.InstanceGroup) { ig.Spec.Provisioner = "gke" }, []string{"spec.provisioner", `"gke"`}},
		{"eks-cf is eks", func(ig *v1alpha1.InstanceGroup) { ig.Spec.Provisioner = v1alpha1.ProvisionerEKSCF }, nil},
		{"managed strategy on eks", func(ig *v1alpha1.InstanceGroup) { ig.Spec.Strategy.Type = v1alpha1.StrategyManaged }, []string{"spec.strategy.type"}},
		{"maxUnavailable 0", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}, []string{"spec.strategy.rollingUpdate.maxUnavailable"}},
		{"maxUnavailable 150%", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}, []string{"spec.strategy.rollingUpdate.maxUnavailable"}},
		{"maxUnavailable 30%", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString("30%"))}
		}, nil},
		{"node health", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{StartupTimeout: &metav1.Duration{Duration: 10 * time.Minute}, MaxReplacing: ptr.To(intstr.FromString("25%"))}
		}, nil},
		{"node health off", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{MaxReplacing: ptr.To(intstr.FromInt32(0))}
		}, nil},
		{"bad node health", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{UnhealthyTimeout: &metav1.Duration{Duration: -time.Minute}, MaxReplacing: ptr.To(intstr.FromString("ten"))}
		}, []string{"spec.eks.nodeHealth.unhealthyTimeout", "spec.eks.nodeHealth.maxReplacing"}},
		{"bad taint effect", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}}
		}, []string{"spec.eks.configuration.taints[0].effect"}},
		{"bad label", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"bad key!": "v"}
		}, []string{"spec.eks.configuration.labels[bad key!]"}},
		{"lifecycle hook of the drain hook's name", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.LifecycleHooks = []v1alpha1.LifecycleHookSpec{{Name: "instance-manager-drain", Lifecycle: "terminate"}}
		}, []string{"spec.eks.configuration.lifecycleHooks[0].name", "reserved"}},
		{"lifecycle hook of another name", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.LifecycleHooks = []v1alpha1.LifecycleHookSpec{{Name: "drain", Lifecycle: "terminate"}}
		}, nil},
		{"name of 63 characters", func(ig *v1alpha1.InstanceGroup) { ig.Name = strings.Repeat("n", 63) }, nil},
		{"name past the node label's 63 characters", func(ig *v1alpha1.InstanceGroup) { ig.Name = strings.Repeat("n", 64) },
			[]string{"metadata.name", "at most 63", "instancemgr.keikoproj.io/instancegroup"}},
		{"tag key of 128 characters, value of 256", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": strings.Repeat("é", 128), "value": strings.Repeat("v", 256)}}
		}, nil},
		{"tag key past 128 characters", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": strings.Repeat("k", 129), "value": "v"}}
		}, []string{"spec.eks.configuration.tags[0].key", "at most 128"}},
		{"tag value past 256 characters", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "k", "value": strings.Repeat("v", 257)}}
		}, []string{"spec.eks.configuration.tags[0].value", "at most 256"}},
		{"as many tags as the group holds", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Tags = tags(41) }, nil},
		{"more tags than the group holds", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.Tags = tags(42) },
			[]string{"spec.eks.configuration.tags", "with the 9 that instance-manager sets", "would have 51 tags", "AWS allows 50: at most 41 tags here, remove at least 1"}},
		{"user data of 14 KB", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.UserData = []v1alpha1.UserDataStage{{Name: "a", Stage: "PreBootstrap", Data: strings.Repeat("#", 14<<10)}}
		}, nil},
		{"user data over 16 KB", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.UserData = []v1alpha1.UserDataStage{{Name: "a", Stage: "PreBootstrap", Data: strings.Repeat("#", 16<<10)}}
		}, []string{"spec.eks.configuration.userData", "EC2 allows 16384 bytes"}},
		{"tag without key", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Tags = []map[string]string{{"value": "v"}}
		}, []string{"spec.eks.configuration.tags[0].key"}},
		{"role without profile", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.RoleName = "r" }, []string{"instanceProfileName"}},
		{"bad spot price", func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKS.Configuration.SpotPrice = "cheap" }, []string{"spec.eks.configuration.spotPrice"}},
		{"crd strategy needs its fields", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{Spec: "{{ .Bad"}}
		}, []string{"spec.strategy.crd.crdName", "spec.strategy.crd.statusJSONPath", "spec.strategy.crd.spec"}},
		{"unknown metric", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.MetricsCollection = []string{"GroupFoo"}
		}, []string{"spec.eks.configuration.metricsCollection[0]"}},
		{"eks-managed needs managed", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
			ig.Spec.EKSManaged = &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "c", Subnets: []string{"s"}}}
		}, []string{"spec.strategy.type", "must be managed"}},
		{"eks-managed SSH key without sources (N14)", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
			ig.Spec.Strategy.Type = v1alpha1.StrategyManaged
			ig.Spec.EKSManaged = &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "c", Subnets: []string{"s"}, KeyPairName: "k"}}
		}, []string{"spec.eks-managed.configuration.securityGroups: Required value", "port 22"}},
		{"eks-managed SSH key with sources", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
			ig.Spec.Strategy.Type = v1alpha1.StrategyManaged
			ig.Spec.EKSManaged = &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "c", Subnets: []string{"s"}, KeyPairName: "k", SecurityGroups: []string{"sg-1"}}}
		}, nil},
		{"eks-managed labels of another pool", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
			ig.Spec.Strategy.Type = v1alpha1.StrategyManaged
			ig.Spec.EKSManaged = &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "c", Subnets: []string{"s"},
				NodeLabels: map[string]string{"karpenter.sh/nodepool": "x"}, Labels: map[string]string{"kubernetes.io/hostname": "h"}}}
		}, []string{"spec.eks-managed.configuration.nodeLabels[karpenter.sh/nodepool]: Forbidden", "spec.eks-managed.configuration.labels[kubernetes.io/hostname]: Forbidden"}},
		{"labels of the VPC CNI's domains (N31)", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.Labels = map[string]string{"k8s.amazonaws.com/eniConfig": "team-b", "vpc.amazonaws.com/has-trunk-attached": "true", "team.example.com/tier": "web"}
		}, []string{"spec.eks.configuration.labels[k8s.amazonaws.com/eniConfig]: Forbidden", "spec.eks.configuration.labels[vpc.amazonaws.com/has-trunk-attached]: Forbidden", "the VPC CNI's"}},
		{"fargate selectors", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.Provisioner = v1alpha1.ProvisionerEKSFargate
			ig.Spec.Strategy.Type = v1alpha1.StrategyManaged
			ig.Spec.EKSFargate = &v1alpha1.EKSFargateSpec{ClusterName: "c", Subnets: []string{"s"}}
		}, []string{"spec.eks-fargate.selectors"}},
		{"weights on every instance type", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstanceTypes: []v1alpha1.InstanceTypeSpec{
				{Type: "m5.large", Weight: 1}, {Type: "m5.xlarge", Weight: 2}}}
		}, nil},
		{"partial weights", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstanceTypes: []v1alpha1.InstanceTypeSpec{
				{Type: "m5.large"}, {Type: "m5.xlarge", Weight: 2}, {Type: "m5.2xlarge", Weight: 4}}}
		}, []string{"spec.eks.configuration.mixedInstancesPolicy.instanceTypes[0].weight", "all or none", "instanceTypes[1] (m5.xlarge) has weight 2"}},
		{"weight above Auto Scaling's range", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstanceTypes: []v1alpha1.InstanceTypeSpec{
				{Type: "m5.large", Weight: 1000}}}
		}, []string{"spec.eks.configuration.mixedInstancesPolicy.instanceTypes[0].weight", "1 to 999"}},
		{"SubFamilyFlexible from a type with a family", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}
		}, nil},
		{"SubFamilyFlexible from a type without a family", func(ig *v1alpha1.InstanceGroup) {
			ig.Spec.EKS.Configuration.InstanceType = "u-6tb1.metal"
			ig.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}
		}, []string{"spec.eks.configuration.instanceType", "SubFamilyFlexible", "list mixedInstancesPolicy.instanceTypes instead"}},
		{"bad os family", func(ig *v1alpha1.InstanceGroup) {
			ig.Annotations = map[string]string{v1alpha1.AnnotationOSFamily: "plan9"}
		}, []string{"instancemgr.keikoproj.io/os-family"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ig := validEKS()
			tc.mutate(ig)
			errs, _ := ValidateInstanceGroup(ig)
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("no error, want %v", tc.want)
			}
			msg := errs.ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestEKSCFWarns(t *testing.T) {
	ig := validEKS()
	ig.Spec.Provisioner = v1alpha1.ProvisionerEKSCF
	_, warnings := ValidateInstanceGroup(ig)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "deprecated") {
		t.Fatalf("warnings = %v", warnings)
	}
}

// tags are n distinct tags of 13-character keys (their record takes three
// tags of 256 characters).
func tags(n int) []map[string]string {
	out := make([]map[string]string, n)
	for i := range out {
		out[i] = map[string]string{"key": fmt.Sprintf("team-tag-%03d", i), "value": "v"}
	}
	return out
}
