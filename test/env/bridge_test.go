package env

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeFor(t *testing.T) {
	inst := ec2types.Instance{
		InstanceId:       aws.String("i-0123456789abcdef0"),
		PrivateDnsName:   aws.String("ip-172-31-1-2.us-west-2.compute.internal"),
		PrivateIpAddress: aws.String("172.31.1.2"),
		Placement:        &ec2types.Placement{AvailabilityZone: aws.String("us-west-2b")},
		InstanceType:     ec2types.InstanceTypeM5Xlarge,
		Architecture:     ec2types.ArchitectureValuesX8664,
		ImageId:          aws.String("ami-1"),
	}
	reg := Registration{
		// A user data label may not override the cloud's instance type.
		Labels: map[string]string{"team": "a", corev1.LabelInstanceTypeStable: "fake"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
	}
	g := gomega.NewWithT(t)
	node, err := nodeFor(inst, "web", "us-west-2", "v1.36.3", reg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(node.Name).To(gomega.Equal("ip-172-31-1-2.us-west-2.compute.internal"))
	g.Expect(node.Spec.ProviderID).To(gomega.Equal("aws:///us-west-2b/i-0123456789abcdef0"))
	g.Expect(node.Labels).To(gomega.Equal(map[string]string{
		"team":                             "a",
		"kubernetes.io/hostname":           "ip-172-31-1-2.us-west-2.compute.internal",
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": "m5.xlarge",
		"topology.kubernetes.io/zone":      "us-west-2b",
		"topology.kubernetes.io/region":    "us-west-2",
	}))
	g.Expect(node.Annotations).To(gomega.Equal(map[string]string{
		KwokAnnotation:           KwokAnnotationValue,
		BridgeInstanceAnnotation: "i-0123456789abcdef0",
		BridgeGroupAnnotation:    "web",
	}))
	g.Expect(node.Spec.Taints).To(gomega.Equal(reg.Taints))
	g.Expect(node.Status.Addresses).To(gomega.Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "172.31.1.2"},
		{Type: corev1.NodeHostName, Address: "ip-172-31-1-2.us-west-2.compute.internal"},
		{Type: corev1.NodeInternalDNS, Address: "ip-172-31-1-2.us-west-2.compute.internal"},
	}))
	g.Expect(node.Status.NodeInfo.KubeletVersion).To(gomega.Equal("v1.36.3"))
	g.Expect(node.Status.Capacity.Cpu().String()).To(gomega.Equal("4"))
	g.Expect(node.Status.Capacity.Memory().String()).To(gomega.Equal("16Gi"))

	arm := inst
	arm.Architecture = ec2types.ArchitectureValuesArm64
	node, err = nodeFor(arm, "web", "us-west-2", "v1.36.3", Registration{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(node.Labels).To(gomega.HaveKeyWithValue("kubernetes.io/arch", "arm64"))

	noDNS := inst
	noDNS.PrivateDnsName = nil
	_, err = nodeFor(noDNS, "web", "us-west-2", "v1.36.3", reg)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no private DNS name")))

	noZone := inst
	noZone.Placement = nil
	_, err = nodeFor(noZone, "web", "us-west-2", "v1.36.3", reg)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no availability zone")))
}

func TestKubeletRejectedLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels []string
		want   []string
	}{
		{"plain and other domains", []string{"team", "example.com/tier", "kubernetes.io.example.com/x"}, nil},
		{"well-known", []string{"kubernetes.io/hostname", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "beta.kubernetes.io/arch"}, nil},
		{"allowed namespaces", []string{"node.kubernetes.io/role", "kubelet.kubernetes.io/x", "foo.node.kubernetes.io/y"}, nil},
		{"node-role is refused", []string{"node-role.kubernetes.io/worker", "team"}, []string{"node-role.kubernetes.io/worker"}},
		{"k8s.io refused", []string{"k8s.io/a", "x.k8s.io/b", "kubernetes.io/custom"}, []string{"k8s.io/a", "kubernetes.io/custom", "x.k8s.io/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{}
			for _, l := range tc.labels {
				labels[l] = ""
			}
			gomega.NewWithT(t).Expect(kubeletRejectedLabels(labels)).To(gomega.Equal(tc.want))
		})
	}
}

func TestInstanceCapacity(t *testing.T) {
	tests := []struct {
		instanceType      string
		cpu, memory, pods string
	}{
		{"m5.large", "2", "8Gi", "29"},
		{"m5.xlarge", "4", "16Gi", "58"},
		{"c5.4xlarge", "16", "32Gi", "234"},
		{"r5.2xlarge", "8", "64Gi", "58"},
		{"m5.24xlarge", "96", "384Gi", "737"},
		{"t3.micro", "2", "1Gi", "4"},
		{"t3.medium", "2", "4Gi", "17"},
		{"weird", "2", "8Gi", "29"},
	}
	for _, tc := range tests {
		t.Run(tc.instanceType, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := instanceCapacity(tc.instanceType)
			g.Expect(c.Cpu().Cmp(resource.MustParse(tc.cpu))).To(gomega.BeZero(), "cpu %s", c.Cpu())
			g.Expect(c.Memory().Cmp(resource.MustParse(tc.memory))).To(gomega.BeZero(), "memory %s", c.Memory())
			g.Expect(c.Pods().Cmp(resource.MustParse(tc.pods))).To(gomega.BeZero(), "pods %s", c.Pods())
		})
	}
}

// fakeEC2 answers the bridge's EC2 reads from fixed data and records the
// launch template lookups.
type fakeEC2 struct {
	instanceUserData string            // DescribeInstanceAttribute userData
	versions         map[string]string // "<id or name>@<version>" -> user data
	asked            []ec2.DescribeLaunchTemplateVersionsInput
}

func (f *fakeEC2) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return &ec2.DescribeInstancesOutput{}, nil
}

func (f *fakeEC2) DescribeInstanceAttribute(_ context.Context, in *ec2.DescribeInstanceAttributeInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceAttributeOutput, error) {
	if in.Attribute != ec2types.InstanceAttributeNameUserData {
		return nil, fmt.Errorf("unexpected attribute %s", in.Attribute)
	}
	return &ec2.DescribeInstanceAttributeOutput{UserData: &ec2types.AttributeValue{Value: aws.String(f.instanceUserData)}}, nil
}

func (f *fakeEC2) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	key := aws.ToString(in.LaunchTemplateId) + aws.ToString(in.LaunchTemplateName) + "@" + in.Versions[0]
	data, ok := f.versions[key]
	if !ok {
		return nil, fmt.Errorf("InvalidLaunchTemplateId.VersionNotFound: %s", key)
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{
		LaunchTemplateData: &ec2types.ResponseLaunchTemplateData{UserData: aws.String(data)},
	}}}, nil
}

type fakeAutoScaling struct {
	launchConfigurations map[string]string // name -> user data
}

func (f *fakeAutoScaling) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return &autoscaling.DescribeAutoScalingGroupsOutput{}, nil
}

func (f *fakeAutoScaling) DescribeLaunchConfigurations(_ context.Context, in *autoscaling.DescribeLaunchConfigurationsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeLaunchConfigurationsOutput, error) {
	out := &autoscaling.DescribeLaunchConfigurationsOutput{}
	for _, name := range in.LaunchConfigurationNames {
		if data, ok := f.launchConfigurations[name]; ok {
			out.LaunchConfigurations = append(out.LaunchConfigurations, asgtypes.LaunchConfiguration{LaunchConfigurationName: aws.String(name), UserData: aws.String(data)})
		}
	}
	return out, nil
}

// The bridge reads the user data an instance booted with: its own attribute,
// else the launch template version EC2 tagged it with, else the group's
// launch template (version as the group names it) or launch configuration.
func TestBridgeUserDataSource(t *testing.T) {
	tagged := ec2types.Instance{InstanceId: aws.String("i-1"), Tags: []ec2types.Tag{
		{Key: aws.String("aws:ec2launchtemplate:id"), Value: aws.String("lt-1")},
		{Key: aws.String("aws:ec2launchtemplate:version"), Value: aws.String("3")},
	}}
	untagged := ec2types.Instance{InstanceId: aws.String("i-2")}
	versions := map[string]string{"lt-1@3": "v3", "lt-1@$Latest": "latest", "web@$Default": "default-by-name"}
	tests := []struct {
		name         string
		instance     ec2types.Instance
		own          string
		group        groupMember
		want, source string
		wantErr      string
	}{
		{name: "instance attribute first", instance: tagged, own: "own", want: "own", source: "instance attribute userData"},
		{name: "tagged launch template version", instance: tagged, want: "v3", source: "launch template lt-1 version 3",
			group: groupMember{launchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String("lt-1"), Version: aws.String("$Latest")}}},
		{name: "group launch template by id", instance: untagged, want: "latest", source: "launch template lt-1 version $Latest",
			group: groupMember{launchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String("lt-1"), Version: aws.String("$Latest")}}},
		{name: "group launch template by name, version defaults to $Default", instance: untagged, want: "default-by-name", source: "launch template web version $Default",
			group: groupMember{launchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("web")}}},
		{name: "launch configuration", instance: untagged, want: "from-lc", source: "launch configuration lc-1",
			group: groupMember{launchConfiguration: "lc-1"}},
		{name: "nothing to read", instance: untagged, want: "", source: "no user data"},
		{name: "missing launch template version", instance: untagged, wantErr: "describe launch template lt-9 version 2",
			group: groupMember{launchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String("lt-9"), Version: aws.String("2")}}},
		{name: "missing launch configuration", instance: untagged, wantErr: "launch configuration gone of group web does not exist",
			group: groupMember{name: "web", launchConfiguration: "gone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			b := &Bridge{
				ec2: &fakeEC2{instanceUserData: tc.own, versions: versions},
				asg: &fakeAutoScaling{launchConfigurations: map[string]string{"lc-1": "from-lc"}},
			}
			data, source, err := b.userData(t.Context(), tc.instance, tc.group)
			if tc.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(data).To(gomega.Equal(tc.want))
			g.Expect(source).To(gomega.Equal(tc.source))
		})
	}
}
