package eksmanaged

import (
	"reflect"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestLabelsUpdate(t *testing.T) {
	cases := []struct {
		name       string
		have, want map[string]string
		add        map[string]string
		remove     []string
	}{
		{"equal", map[string]string{"a": "1"}, map[string]string{"a": "1"}, nil, nil},
		{"both empty", nil, map[string]string{}, nil, nil},
		{"new label", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "2"}, nil},
		{"changed value", map[string]string{"a": "1"}, map[string]string{"a": "2"}, map[string]string{"a": "2"}, nil},
		{"removed labels, sorted", map[string]string{"a": "1", "z": "9", "m": "5"}, map[string]string{"a": "1"}, nil, []string{"m", "z"}},
		{"add and remove", map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "3", "c": "4"},
			map[string]string{"b": "3", "c": "4"}, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := labelsUpdate(tc.have, tc.want)
			if tc.add == nil && tc.remove == nil {
				if got != nil {
					t.Fatalf("update %+v, want none", got)
				}
				return
			}
			if got == nil || !reflect.DeepEqual(got.AddOrUpdateLabels, tc.add) || !reflect.DeepEqual(got.RemoveLabels, tc.remove) {
				t.Fatalf("update %+v, want add %v remove %v", got, tc.add, tc.remove)
			}
		})
	}
}

func taint(key, value string, effect ekstypes.TaintEffect) ekstypes.Taint {
	t := ekstypes.Taint{Key: awssdk.String(key), Effect: effect}
	if value != "" {
		t.Value = awssdk.String(value)
	}
	return t
}

func TestTaintsUpdate(t *testing.T) {
	ns, ne := ekstypes.TaintEffectNoSchedule, ekstypes.TaintEffectNoExecute
	cases := []struct {
		name        string
		have, want  []ekstypes.Taint
		add, remove []ekstypes.Taint
	}{
		{"equal", []ekstypes.Taint{taint("a", "x", ns)}, []ekstypes.Taint{taint("a", "x", ns)}, nil, nil},
		{"none", nil, nil, nil, nil},
		{"new taint", nil, []ekstypes.Taint{taint("a", "x", ns)}, []ekstypes.Taint{taint("a", "x", ns)}, nil},
		{"value change replaces", []ekstypes.Taint{taint("a", "x", ns)}, []ekstypes.Taint{taint("a", "y", ns)}, []ekstypes.Taint{taint("a", "y", ns)}, nil},
		{"value removed replaces", []ekstypes.Taint{taint("a", "x", ns)}, []ekstypes.Taint{taint("a", "", ns)}, []ekstypes.Taint{taint("a", "", ns)}, nil},
		{"same key, other effect: add one, remove the other",
			[]ekstypes.Taint{taint("a", "x", ns)}, []ekstypes.Taint{taint("a", "x", ne)},
			[]ekstypes.Taint{taint("a", "x", ne)}, []ekstypes.Taint{taint("a", "x", ns)}},
		{"removed taints, sorted", []ekstypes.Taint{taint("z", "", ns), taint("b", "1", ne), taint("keep", "", ns)}, []ekstypes.Taint{taint("keep", "", ns)},
			nil, []ekstypes.Taint{taint("b", "1", ne), taint("z", "", ns)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := taintsUpdate(tc.have, tc.want)
			if tc.add == nil && tc.remove == nil {
				if got != nil {
					t.Fatalf("update %+v, want none", got)
				}
				return
			}
			if got == nil || !reflect.DeepEqual(got.AddOrUpdateTaints, tc.add) || !reflect.DeepEqual(got.RemoveTaints, tc.remove) {
				t.Fatalf("update %+v, want add %+v remove %+v", got, tc.add, tc.remove)
			}
		})
	}
}

func TestScalingUpdate(t *testing.T) {
	sc := func(min, max, desired int32) *ekstypes.NodegroupScalingConfig {
		return &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(min), MaxSize: awssdk.Int32(max), DesiredSize: awssdk.Int32(desired)}
	}
	cases := []struct {
		name     string
		have     *ekstypes.NodegroupScalingConfig
		min, max int32
		want     *ekstypes.NodegroupScalingConfig
	}{
		{"unchanged, desired above min kept", sc(1, 5, 3), 1, 5, nil},
		{"max raised: desired kept", sc(1, 5, 3), 1, 8, sc(1, 8, 3)},
		{"min raised above desired: desired follows", sc(1, 5, 3), 4, 5, sc(4, 5, 4)},
		{"max lowered below desired: desired follows", sc(1, 5, 4), 1, 2, sc(1, 2, 2)},
		{"desired outside the range alone", sc(2, 5, 7), 2, 5, sc(2, 5, 5)},
		{"no scaling config", nil, 0, 3, sc(0, 3, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := scalingUpdate(tc.have, tc.min, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("scaling update %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigUpdateSendsOnlyWhatDiffers(t *testing.T) {
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Labels: map[string]string{"a": "1"}})
	want, _ := desiredNodegroup(ig, refs{subnets: []string{"subnet-a"}})
	have := &ekstypes.Nodegroup{
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(2), MaxSize: awssdk.Int32(5), DesiredSize: awssdk.Int32(2)},
		Labels:        map[string]string{"a": "1", v1alpha1.LabelInstanceGroup: "web", v1alpha1.LabelInstanceGroupNamespace: "team-a"},
	}
	if in, what := configUpdate(have, want); in != nil {
		t.Fatalf("update %v for an unchanged node group", what)
	}
	have.Labels["stale"] = "x"
	have.ScalingConfig.MaxSize = awssdk.Int32(3)
	in, what := configUpdate(have, want)
	if in == nil || in.Taints != nil || in.Labels == nil || in.ScalingConfig == nil || len(what) != 2 {
		t.Fatalf("update %+v (%v), want labels and scaling only", in, what)
	}
}

func TestVersionUpdate(t *testing.T) {
	have := &ekstypes.Nodegroup{Version: awssdk.String("1.29"), ReleaseVersion: awssdk.String("1.29.0-20240101")}
	cases := []struct {
		name             string
		version, release string
		wantVersion      string // "" = no update
		wantRelease      *string
	}{
		{"nothing set: EKS's choice is kept", "", "", "", nil},
		{"same version", "1.29", "", "", nil},
		{"same version and release", "1.29", "1.29.0-20240101", "", nil},
		{"new version, latest release", "1.30", "", "1.30", nil},
		{"new version and release", "1.30", "1.30.2-20240601", "1.30", awssdk.String("1.30.2-20240601")},
		{"new release only: the node group's version is sent, not the cluster's", "", "1.29.5-20240301", "1.29", awssdk.String("1.29.5-20240301")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := desiredNodegroup(managedGroup(v1alpha1.EKSManagedConfiguration{Version: tc.version, ReleaseVersion: tc.release}), refs{})
			in, what := versionUpdate(have, want)
			if tc.wantVersion == "" {
				if in != nil {
					t.Fatalf("update %q, want none", what)
				}
				return
			}
			if in == nil || awssdk.ToString(in.Version) != tc.wantVersion || !reflect.DeepEqual(in.ReleaseVersion, tc.wantRelease) || what == "" {
				t.Fatalf("update %+v (%q), want version %s release %v", in, what, tc.wantVersion, awssdk.ToString(tc.wantRelease))
			}
		})
	}
}

func TestImmutableChanges(t *testing.T) {
	base := v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large", AmiType: "AL2_x86_64", VolSize: 20, KeyPairName: "ops"}
	r := refs{subnets: []string{"subnet-a", "subnet-b"}, sourceSGs: []string{"sg-1"}, roleARN: "arn:aws:iam::1:role/nodes"}
	existing := func() *ekstypes.Nodegroup {
		return &ekstypes.Nodegroup{
			NodeRole: awssdk.String("arn:aws:iam::1:role/nodes"), Subnets: []string{"subnet-b", "subnet-a"},
			InstanceTypes: []string{"m5.large"}, AmiType: "AL2_x86_64", DiskSize: awssdk.Int32(20), CapacityType: "ON_DEMAND",
			RemoteAccess: &ekstypes.RemoteAccessConfig{Ec2SshKey: awssdk.String("ops"), SourceSecurityGroups: []string{"sg-1"}},
		}
	}
	cases := []struct {
		name   string
		edit   func(c *v1alpha1.EKSManagedConfiguration, r *refs)
		fields []string
	}{
		{"unchanged (subnet order ignored)", func(*v1alpha1.EKSManagedConfiguration, *refs) {}, nil},
		{"subnets", func(_ *v1alpha1.EKSManagedConfiguration, r *refs) { r.subnets = []string{"subnet-a", "subnet-c"} }, []string{"subnets"}},
		{"instance type", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) { c.InstanceType = "m5.xlarge" }, []string{"instanceType"}},
		{"instance types", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) {
			c.InstanceType, c.InstanceTypes = "", []string{"m5.large", "m5a.large"}
		}, []string{"instanceTypes"}},
		{"AMI type", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) { c.AmiType = "AL2023_x86_64_STANDARD" }, []string{"amiType"}},
		{"disk size", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) { c.VolSize = 50 }, []string{"volSize"}},
		{"key pair", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) { c.KeyPairName = "other" }, []string{"keyPairName"}},
		{"remote access sources", func(_ *v1alpha1.EKSManagedConfiguration, r *refs) { r.sourceSGs = []string{"sg-1", "sg-2"} }, []string{"securityGroups"}},
		{"capacity type", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) { c.CapacityType = "SPOT" }, []string{"capacityType"}},
		{"node role", func(_ *v1alpha1.EKSManagedConfiguration, r *refs) { r.roleARN = "arn:aws:iam::1:role/other" }, []string{"nodeRole"}},
		{"unset optional fields are EKS's choice", func(c *v1alpha1.EKSManagedConfiguration, _ *refs) {
			c.InstanceType, c.AmiType, c.VolSize, c.KeyPairName = "", "", 0, ""
		}, nil},
		{"several", func(c *v1alpha1.EKSManagedConfiguration, r *refs) {
			c.VolSize, c.AmiType, r.subnets = 30, "BOTTLEROCKET_x86_64", []string{"subnet-z"}
		}, []string{"subnets", "amiType", "volSize"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, rr := base, r
			tc.edit(&c, &rr)
			ig := managedGroup(c)
			want, err := desiredNodegroup(ig, rr)
			if err != nil {
				t.Fatal(err)
			}
			changes := immutableChanges(existing(), want, ig.Spec.EKSManaged.Configuration)
			var fields []string
			for _, ch := range changes {
				fields = append(fields, ch.field)
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Fatalf("changed fields %v, want %v", fields, tc.fields)
			}
			for _, ch := range changes {
				if ch.have == ch.want {
					t.Errorf("change %+v names equal values", ch)
				}
			}
		})
	}
}
