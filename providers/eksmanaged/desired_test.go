package eksmanaged

import (
	"reflect"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func managedGroup(c v1alpha1.EKSManagedConfiguration) *v1alpha1.InstanceGroup {
	if c.ClusterName == "" {
		c.ClusterName = "prod"
	}
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec: v1alpha1.InstanceGroupSpec{
			Provisioner: v1alpha1.ProvisionerEKSManaged,
			EKSManaged:  &v1alpha1.EKSManagedSpec{MinSize: 2, MaxSize: 5, Configuration: &c},
		},
	}
}

func TestDesiredNodegroup(t *testing.T) {
	groupLabels := map[string]string{v1alpha1.LabelInstanceGroup: "web", v1alpha1.LabelInstanceGroupNamespace: "team-a"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range groupLabels {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name  string
		c     v1alpha1.EKSManagedConfiguration
		check func(t *testing.T, ng nodegroup)
	}{
		{"labels win over deprecated nodeLabels; group labels added",
			v1alpha1.EKSManagedConfiguration{NodeLabels: map[string]string{"a": "old", "b": "kept"}, Labels: map[string]string{"a": "new"}},
			func(t *testing.T, ng nodegroup) {
				if want := with(map[string]string{"a": "new", "b": "kept"}); !reflect.DeepEqual(ng.labels, want) {
					t.Errorf("labels %v, want %v", ng.labels, want)
				}
			}},
		{"taint effects take EKS names; empty value omitted",
			v1alpha1.EKSManagedConfiguration{Taints: []corev1.Taint{
				{Key: "a", Value: "x", Effect: corev1.TaintEffectNoSchedule},
				{Key: "b", Effect: corev1.TaintEffectNoExecute},
				{Key: "c", Value: "z", Effect: corev1.TaintEffectPreferNoSchedule}}},
			func(t *testing.T, ng nodegroup) {
				want := []ekstypes.Taint{
					{Key: awssdk.String("a"), Value: awssdk.String("x"), Effect: ekstypes.TaintEffectNoSchedule},
					{Key: awssdk.String("b"), Effect: ekstypes.TaintEffectNoExecute},
					{Key: awssdk.String("c"), Value: awssdk.String("z"), Effect: ekstypes.TaintEffectPreferNoSchedule}}
				if !reflect.DeepEqual(ng.taints, want) {
					t.Errorf("taints %+v, want %+v", ng.taints, want)
				}
			}},
		{"instanceType becomes the one instance type; capacity defaults to ON_DEMAND",
			v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large"},
			func(t *testing.T, ng nodegroup) {
				if !reflect.DeepEqual(ng.instanceTypes, []string{"m5.large"}) || ng.capacityType != "ON_DEMAND" {
					t.Errorf("instance types %v, capacity %q", ng.instanceTypes, ng.capacityType)
				}
			}},
		{"instanceTypes are used as given with SPOT",
			v1alpha1.EKSManagedConfiguration{InstanceTypes: []string{"m5.large", "m5a.large"}, CapacityType: "SPOT"},
			func(t *testing.T, ng nodegroup) {
				if !reflect.DeepEqual(ng.instanceTypes, []string{"m5.large", "m5a.large"}) || ng.capacityType != "SPOT" {
					t.Errorf("instance types %v, capacity %q", ng.instanceTypes, ng.capacityType)
				}
			}},
		{"no instance type leaves EKS's default",
			v1alpha1.EKSManagedConfiguration{},
			func(t *testing.T, ng nodegroup) {
				if ng.instanceTypes != nil {
					t.Errorf("instance types %v, want none", ng.instanceTypes)
				}
			}},
		{"tags as a map plus the ownership tags and the record of the spec's",
			v1alpha1.EKSManagedConfiguration{Tags: []map[string]string{{"key": "team", "value": "a"}, {"key": "cost", "value": "42"}}},
			func(t *testing.T, ng nodegroup) {
				want := map[string]string{"team": "a", "cost": "42", "instancemgr.keikoproj.io/instancegroup": "team-a/web", "instancemgr.keikoproj.io/cluster/prod": "owned",
					"instancemgr.keikoproj.io/managed-tags": "cost,team"}
				if !reflect.DeepEqual(ng.tags, want) {
					t.Errorf("tags %v, want %v", ng.tags, want)
				}
			}},
		{"security groups are remote access sources only with a key pair",
			v1alpha1.EKSManagedConfiguration{},
			func(t *testing.T, ng nodegroup) {
				if ng.keyPair != "" || ng.sourceSGs != nil {
					t.Errorf("remote access %q %v without keyPairName", ng.keyPair, ng.sourceSGs)
				}
			}},
		{"key pair with source security groups",
			v1alpha1.EKSManagedConfiguration{KeyPairName: "ops"},
			func(t *testing.T, ng nodegroup) {
				if ng.keyPair != "ops" || !reflect.DeepEqual(ng.sourceSGs, []string{"sg-1", "sg-2"}) {
					t.Errorf("remote access %q %v", ng.keyPair, ng.sourceSGs)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ng, err := desiredNodegroup(managedGroup(tc.c), refs{subnets: []string{"subnet-b", "subnet-a"}, sourceSGs: []string{"sg-2", "sg-1"}, roleARN: "arn:aws:iam::1:role/r"})
			if err != nil {
				t.Fatal(err)
			}
			if ng.name != ngName || !reflect.DeepEqual(ng.subnets, []string{"subnet-a", "subnet-b"}) || ng.min != 2 || ng.max != 5 {
				t.Fatalf("name %q subnets %v sizes %d..%d", ng.name, ng.subnets, ng.min, ng.max)
			}
			tc.check(t, ng)
		})
	}
}

func TestDesiredNodegroupRejectsUnknownTaintEffect(t *testing.T) {
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Taints: []corev1.Taint{{Key: "a", Effect: "Sometimes"}}})
	_, err := desiredNodegroup(ig, refs{})
	if !providers.IsSpecError(err) || !strings.Contains(err.Error(), "spec.eks-managed.configuration.taints[0].effect") {
		t.Fatalf("error %v, want a SpecError on the taint's effect", err)
	}
}

func TestCreateInput(t *testing.T) {
	ng, err := desiredNodegroup(managedGroup(v1alpha1.EKSManagedConfiguration{
		InstanceType: "m5.large", VolSize: 40, AmiType: "AL2_x86_64", KeyPairName: "ops", Version: "1.30", ReleaseVersion: "1.30.0-20240101",
	}), refs{subnets: []string{"subnet-a"}, sourceSGs: []string{"sg-1"}, roleARN: "arn:aws:iam::1:role/r"})
	if err != nil {
		t.Fatal(err)
	}
	in := ng.createInput()
	s := in.ScalingConfig
	if *s.MinSize != 2 || *s.MaxSize != 5 || *s.DesiredSize != 2 {
		t.Errorf("scaling %d/%d/%d, want min 2, max 5, desired = min", *s.MinSize, *s.MaxSize, *s.DesiredSize)
	}
	if *in.DiskSize != 40 || in.AmiType != "AL2_x86_64" || *in.Version != "1.30" || *in.ReleaseVersion != "1.30.0-20240101" ||
		*in.RemoteAccess.Ec2SshKey != "ops" || !reflect.DeepEqual(in.RemoteAccess.SourceSecurityGroups, []string{"sg-1"}) ||
		*in.NodeRole != "arn:aws:iam::1:role/r" || in.CapacityType != "ON_DEMAND" {
		t.Errorf("create input %+v", in)
	}

	// Unset optional fields are left to EKS.
	ng, _ = desiredNodegroup(managedGroup(v1alpha1.EKSManagedConfiguration{}), refs{subnets: []string{"subnet-a"}})
	in = ng.createInput()
	if in.DiskSize != nil || in.AmiType != "" || in.Version != nil || in.ReleaseVersion != nil || in.RemoteAccess != nil || in.InstanceTypes != nil {
		t.Errorf("create input sets fields the spec left empty: %+v", in)
	}
}

func TestNodegroupNameFitsEKS(t *testing.T) {
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{ClusterName: "a-very-long-cluster-name-used-by-the-platform-team"})
	ig.Name = "web.frontend.workers-with-a-long-name"
	name := nodegroupName(ig)
	if len(name) > 63 || strings.ContainsAny(name, ".") {
		t.Fatalf("node group name %q: more than 63 characters or a '.'", name)
	}
	other := ig.DeepCopy()
	other.Name = "web-frontend-workers-with-a-long-name"
	if nodegroupName(other) == name {
		t.Errorf("names differing only by '.' and '-' map to the same node group %q", name)
	}
}
