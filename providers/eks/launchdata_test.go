package eks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// pinnedGroup is a fixed spec that sets every launch data field.
func pinnedGroup() (*v1alpha1.InstanceGroup, launchInput) {
	ig := eksGroup(v1alpha1.EKSConfiguration{
		InstanceType: "m5.large", KeyPairName: "ops", SpotPrice: "0.67",
		Volumes: []v1alpha1.NodeVolume{
			{Name: "/dev/xvda", Type: "gp3", Size: 50, Iops: 3000, Throughput: 125, Encrypted: ptr.To(true)},
			{Name: "/dev/xvdb", SnapshotID: "snap-1", DeleteOnTermination: ptr.To(false)},
		},
		MetadataOptions:       &v1alpha1.MetadataOptions{HttpPutResponseHopLimit: 2},
		Placement:             &v1alpha1.PlacementSpec{AvailabilityZone: "us-west-2a", Tenancy: "dedicated"},
		LicenseSpecifications: []string{"arn:aws:license-manager:us-west-2:123456789012:license-configuration:lic-1"},
		Taints:                []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
	})
	return ig, launchInput{imageID: "ami-0123456789abcdef0", profileName: "prod-team-a-web", securityGroups: []string{"sg-1", "sg-2"},
		userData: "#!/bin/bash\n/etc/eks/bootstrap.sh prod\n"}
}

// TestLaunchDataHashIsPinned pins the version description of a fixed spec.
// The description decides drift: when it changes, every node of every
// group whose data hashes differently rotates after an upgrade of the
// controller. A failure here means such a change; make it only on
// purpose, and say in docs/install.md's upgrade notes that nodes rotate.
func TestLaunchDataHashIsPinned(t *testing.T) {
	ig, in := pinnedGroup()
	const want = "instance-manager:v2:873946026b6ef0066f6cb81c"
	if got := launchDataOf(ig, in).description(); got != want {
		t.Errorf("launch data description = %q, pinned %q.\nencoding:\n%s", got, want, launchDataOf(ig, in).encode())
	}
}

// TestLaunchDataEncodesEveryField changes each field of launchData (and of
// its volumes) in turn: each must change the encoding, so a field added to
// the struct cannot be forgotten by encode.
func TestLaunchDataEncodesEveryField(t *testing.T) {
	ig, in := pinnedGroup()
	base := launchDataOf(ig, in)
	check := func(name string, d launchData) {
		t.Helper()
		if string(d.encode()) == string(base.encode()) {
			t.Errorf("changing %s does not change the encoding", name)
		}
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		d := launchDataOf(ig, in)
		mutate(t, reflect.ValueOf(&d).Elem().Field(i))
		check(typ.Field(i).Name, d)
	}
	vt := reflect.TypeOf(launchVolume{})
	for i := range vt.NumField() {
		d := launchDataOf(ig, in)
		d.Volumes = append([]launchVolume(nil), d.Volumes...)
		mutate(t, reflect.ValueOf(&d.Volumes[0]).Elem().Field(i))
		check("Volumes[0]."+vt.Field(i).Name, d)
	}
	tt := reflect.TypeOf(launchTagSpec{})
	for i := range tt.NumField() {
		d := launchDataOf(ig, in)
		d.TagSpecs = append([]launchTagSpec{{ResourceType: "volume", Tags: [][2]string{{"k", "v"}}}}, d.TagSpecs...)
		base := launchDataOf(ig, in)
		base.TagSpecs = append([]launchTagSpec{{ResourceType: "volume", Tags: [][2]string{{"k", "v"}}}}, base.TagSpecs...)
		mutateTagSpec(t, reflect.ValueOf(&d.TagSpecs[0]).Elem().Field(i))
		if string(d.encode()) == string(base.encode()) {
			t.Errorf("changing TagSpecs[0].%s does not change the encoding", tt.Field(i).Name)
		}
	}
	// Lists are counted: moving an item between neighbours changes it.
	d := launchDataOf(ig, in)
	d.SecurityGroupIDs, d.Licenses = []string{"sg-1"}, []string{"sg-2"}
	e := launchDataOf(ig, in)
	e.SecurityGroupIDs, e.Licenses = []string{"sg-1", "sg-2"}, nil
	if string(d.encode()) == string(e.encode()) {
		t.Error("items moved from one list to the next encode the same")
	}
}

// mutateTagSpec changes a field of a launchTagSpec.
func mutateTagSpec(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.ValueOf([2]string{"another", "tag"})))
	default:
		t.Fatalf("mutateTagSpec: no rule for %s; extend encode and this test", v.Type())
	}
}

func mutate(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.String:
			v.Set(reflect.Append(v, reflect.ValueOf("extra")))
		default:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		} else {
			v.Set(reflect.Zero(v.Type()))
		}
	default:
		t.Fatalf("mutate: no rule for %s; extend encode and this test", v.Type())
	}
}

// legacyDescriptionOf is the description the controller wrote before the
// canonical launch data (and until v2): the JSON of the SDK request.
func legacyDescriptionOf(d *ec2types.RequestLaunchTemplateData) string {
	raw, _ := json.Marshal(d)
	sum := sha256.Sum256(raw)
	return versionDescriptionPrefix + hex.EncodeToString(sum[:12])
}

// storedAs is what DescribeLaunchTemplateVersions answers for a version
// created from req (the fields launch data reads).
func storedAs(req *ec2types.RequestLaunchTemplateData) *ec2types.ResponseLaunchTemplateData {
	s := &ec2types.ResponseLaunchTemplateData{ImageId: req.ImageId, InstanceType: req.InstanceType, KeyName: req.KeyName,
		SecurityGroupIds: req.SecurityGroupIds, UserData: req.UserData,
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecification{Name: req.IamInstanceProfile.Name},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpEndpoint: req.MetadataOptions.HttpEndpoint,
			HttpTokens: ec2types.LaunchTemplateHttpTokensState(req.MetadataOptions.HttpTokens), HttpPutResponseHopLimit: req.MetadataOptions.HttpPutResponseHopLimit,
			State: ec2types.LaunchTemplateInstanceMetadataOptionsStateApplied},
	}
	for _, m := range req.BlockDeviceMappings {
		e := m.Ebs
		s.BlockDeviceMappings = append(s.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMapping{DeviceName: m.DeviceName,
			Ebs: &ec2types.LaunchTemplateEbsBlockDevice{VolumeType: e.VolumeType, VolumeSize: e.VolumeSize, Iops: e.Iops, Throughput: e.Throughput,
				SnapshotId: e.SnapshotId, DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted}})
	}
	if o := req.InstanceMarketOptions; o != nil {
		s.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptions{MarketType: o.MarketType,
			SpotOptions: &ec2types.LaunchTemplateSpotMarketOptions{MaxPrice: o.SpotOptions.MaxPrice}}
	}
	if p := req.Placement; p != nil {
		s.Placement = &ec2types.LaunchTemplatePlacement{AvailabilityZone: p.AvailabilityZone, HostResourceGroupArn: p.HostResourceGroupArn, Tenancy: p.Tenancy}
	}
	for _, l := range req.LicenseSpecifications {
		s.LicenseSpecifications = append(s.LicenseSpecifications, ec2types.LaunchTemplateLicenseConfiguration{LicenseConfigurationArn: l.LicenseConfigurationArn})
	}
	// EC2 keeps its own order: the resource types reversed here.
	for i := len(req.TagSpecifications) - 1; i >= 0; i-- {
		ts := req.TagSpecifications[i]
		s.TagSpecifications = append(s.TagSpecifications, ec2types.LaunchTemplateTagSpecification{ResourceType: ts.ResourceType, Tags: ts.Tags})
	}
	return s
}

// TestTemplatesOfTheEarlierHashAreKept: a version written by the earlier
// controller (description = hash of the SDK request's JSON) whose stored
// data equals the desired data is kept, so upgrading the controller
// rotates no node; a stored version that differs gets a new version with
// the canonical description, as any change.
func TestTemplatesOfTheEarlierHashAreKept(t *testing.T) {
	ig, in := pinnedGroup()
	want := launchDataOf(ig, in)
	legacy := legacyDescriptionOf(want.request())
	if !legacyDescription(legacy) || legacyDescription(want.description()) {
		t.Fatalf("legacyDescription(%q) = %v, legacyDescription(%q) = %v", legacy, legacyDescription(legacy), want.description(), legacyDescription(want.description()))
	}
	cases := []struct {
		name       string
		st         templateState
		newVersion bool
	}{
		{"the canonical description", templateState{exists: true, version: 7, description: want.description()}, false},
		{"an earlier hash, same data", templateState{exists: true, version: 7, description: legacy, data: storedAs(want.request())}, false},
		{"an earlier hash, another image", templateState{exists: true, version: 7, description: legacy, data: func() *ec2types.ResponseLaunchTemplateData {
			s := storedAs(want.request())
			s.ImageId = awssdk.String("ami-old")
			return s
		}()}, true},
		{"an earlier hash, data not read", templateState{exists: true, version: 7, description: legacy}, true},
		{"another description, same data", templateState{exists: true, version: 7, description: "made by hand", data: storedAs(want.request())}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeTemplate("lt", ec2types.LaunchTemplateVersion{VersionNumber: awssdk.Int64(7),
				VersionDescription: awssdk.String(c.st.description), LaunchTemplateData: c.st.data})
			st, err := ensureLaunchTemplate(context.Background(), f, ig, "lt", c.st, want, &versionContents{})
			if err != nil {
				t.Fatal(err)
			}
			v := st.version
			if got := f.created > 0; got != c.newVersion {
				t.Fatalf("new version created = %v, want %v", got, c.newVersion)
			}
			if c.newVersion {
				if d := awssdk.ToString(f.versions[len(f.versions)-1].VersionDescription); v != 8 || d != want.description() {
					t.Errorf("version %d %q, want 8 %q", v, d, want.description())
				}
			} else if v != 7 {
				t.Errorf("version %d, want the stored 7", v)
			}
		})
	}
}

// TestTagSpecificationsReachTheLaunchTemplate: spec.eks.configuration
// .tagSpecifications become the launch template's TagSpecifications, and a
// stored version with the same tags in another order (EC2 keeps its own)
// is the same launch data: no new version, no rotation.
func TestTagSpecificationsReachTheLaunchTemplate(t *testing.T) {
	ig, in := pinnedGroup()
	ig.Spec.EKS.Configuration.TagSpecifications = []v1alpha1.TagSpecification{
		{ResourceType: "volume", Tags: []map[string]string{{"key": "backup", "value": "daily"}}},
		{ResourceType: "instance", Tags: []map[string]string{{"key": "team", "value": "a"}, {"key": "cost-center", "value": "42"}}},
	}
	d := launchDataOf(ig, in)
	req := d.request()
	var got []string
	for _, ts := range req.TagSpecifications {
		for _, tag := range ts.Tags {
			got = append(got, fmt.Sprintf("%s %s=%s", ts.ResourceType, awssdk.ToString(tag.Key), awssdk.ToString(tag.Value)))
		}
	}
	want := []string{"instance cost-center=42", "instance team=a", "volume backup=daily"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TagSpecifications %v, want %v", got, want)
	}
	stored := launchDataFromStored(storedAs(req))
	if !reflect.DeepEqual(stored, d) || stored.description() != d.description() {
		t.Errorf("stored in EC2's order, the data differs:\n%+v\n%+v", stored.TagSpecs, d.TagSpecs)
	}
	plain, _ := pinnedGroup()
	if launchDataOf(plain, in).description() == d.description() {
		t.Error("tag specifications do not change the version description")
	}
}
