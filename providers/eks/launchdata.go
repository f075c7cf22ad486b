package eks

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
)

// launchData is this project's own description of a launch template
// version: exactly the fields the controller sets, nothing else. Drift is
// decided from it (its hash, kept in the version description), never from
// a serialized AWS SDK type, so an SDK upgrade that adds a field to
// RequestLaunchTemplateData changes no hash and rotates no node.
//
// Adding a field here changes the hash of every group that sets it (and,
// through encode, of every group): that rotates nodes and must be a
// deliberate, reviewed change (TestLaunchDataHashIsPinned fails until the
// pinned hash is updated; TestLaunchDataEncodesEveryField fails if the
// field is not encoded).
type launchData struct {
	ImageID      string
	InstanceType string
	KeyName      string
	// SecurityGroupIDs as resolved (sorted, see resolve.Resolver.SecurityGroupIDs).
	SecurityGroupIDs []string
	// InstanceProfile is the instance profile's name.
	InstanceProfile string
	// UserData is base64, as sent to EC2.
	UserData string
	// Volumes are the block device mappings in spec order.
	Volumes []launchVolume
	// Instance metadata service settings (always set, see launchtemplate.MetadataSettings).
	HTTPEndpoint, HTTPTokens string
	HTTPHopLimit             int32
	// SpotMaxPrice requests spot instances at this maximum price; "" is
	// on-demand.
	SpotMaxPrice string
	// Placement; all empty is no placement.
	AvailabilityZone, HostResourceGroupArn, Tenancy string
	// Licenses are license configuration ARNs in spec order.
	Licenses []string
	// TagSpecs are the tags of the resources a launch creates, by resource
	// type, each type's tags sorted by key (the order EC2 keeps is not
	// the spec's).
	TagSpecs []launchTagSpec
}

// launchTagSpec is one resource type's tags ([key, value] pairs).
type launchTagSpec struct {
	ResourceType string
	Tags         [][2]string
}

// sortTagSpecs puts specs in the canonical order launchData compares in.
func sortTagSpecs(specs []launchTagSpec) []launchTagSpec {
	for _, s := range specs {
		sort.Slice(s.Tags, func(i, j int) bool { return s.Tags[i][0] < s.Tags[j][0] })
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].ResourceType < specs[j].ResourceType })
	return specs
}

// launchVolume is one EBS block device mapping; zero numbers and ""
// strings are unset.
type launchVolume struct {
	Device                 string
	Type                   string
	Size, Iops, Throughput int32
	SnapshotID             string
	DeleteOnTermination    bool
	// Encrypted nil leaves the account default.
	Encrypted *bool
}

// launchDataVersion names the encoding below. It is part of the version
// description, so a description written by another encoding is never
// mistaken for this one.
const launchDataVersion = "v2"

// encode is the canonical byte form of d: one "name=value" line per field
// in a fixed order, strings quoted, lists as a count then their items. It
// depends on nothing but d, so the same data always hashes the same.
func (d launchData) encode() []byte {
	var b strings.Builder
	str := func(name, v string) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(v))
		b.WriteByte('\n')
	}
	num := func(name string, v int64) { str(name, strconv.FormatInt(v, 10)) }
	optBool := func(name string, v *bool) {
		switch {
		case v == nil:
			str(name, "")
		default:
			str(name, strconv.FormatBool(*v))
		}
	}
	str("encoding", launchDataVersion)
	str("imageId", d.ImageID)
	str("instanceType", d.InstanceType)
	str("keyName", d.KeyName)
	num("securityGroupIds", int64(len(d.SecurityGroupIDs)))
	for _, s := range d.SecurityGroupIDs {
		str("securityGroupId", s)
	}
	str("instanceProfile", d.InstanceProfile)
	str("userData", d.UserData)
	num("volumes", int64(len(d.Volumes)))
	for _, v := range d.Volumes {
		str("volume.device", v.Device)
		str("volume.type", v.Type)
		num("volume.size", int64(v.Size))
		num("volume.iops", int64(v.Iops))
		num("volume.throughput", int64(v.Throughput))
		str("volume.snapshotId", v.SnapshotID)
		optBool("volume.deleteOnTermination", &v.DeleteOnTermination)
		optBool("volume.encrypted", v.Encrypted)
	}
	str("metadata.httpEndpoint", d.HTTPEndpoint)
	str("metadata.httpTokens", d.HTTPTokens)
	num("metadata.httpPutResponseHopLimit", int64(d.HTTPHopLimit))
	str("spotMaxPrice", d.SpotMaxPrice)
	str("placement.availabilityZone", d.AvailabilityZone)
	str("placement.hostResourceGroupArn", d.HostResourceGroupArn)
	str("placement.tenancy", d.Tenancy)
	num("licenses", int64(len(d.Licenses)))
	for _, l := range d.Licenses {
		str("license", l)
	}
	// Written only when set: the data of groups without them hashes as it
	// did before the field existed, so upgrading the controller rotates
	// nothing.
	if len(d.TagSpecs) > 0 {
		num("tagSpecifications", int64(len(d.TagSpecs)))
		for _, ts := range d.TagSpecs {
			str("tagSpecification.resourceType", ts.ResourceType)
			num("tagSpecification.tags", int64(len(ts.Tags)))
			for _, t := range ts.Tags {
				str("tag.key", t[0])
				str("tag.value", t[1])
			}
		}
	}
	return []byte(b.String())
}

// description is the version description that identifies d: the prefix,
// the encoding version and 12 bytes of the SHA-256 of encode.
func (d launchData) description() string {
	sum := sha256.Sum256(d.encode())
	return versionDescriptionPrefix + launchDataVersion + ":" + hex.EncodeToString(sum[:12])
}

// legacyDescription reports whether desc was written by a controller
// version that hashed the JSON of the SDK's RequestLaunchTemplateData:
// "instance-manager:" and 24 hex digits. Such a hash cannot be recomputed
// reliably (it depends on the SDK version that wrote it), so drift against
// it is decided by comparing the stored version's data (see sameAsStored).
func legacyDescription(desc string) bool {
	rest, ok := strings.CutPrefix(desc, versionDescriptionPrefix)
	if !ok || len(rest) != 24 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// launchDataOf is the launch data of ig: AMI, instance type, key pair,
// security groups, instance profile, user data, volumes (GiB), IMDS
// options, spot price, placement and licenses.
func launchDataOf(ig *v1alpha1.InstanceGroup, in launchInput) launchData {
	c := ig.Spec.EKS.Configuration
	d := launchData{
		ImageID:          in.imageID,
		InstanceType:     c.InstanceType,
		KeyName:          c.KeyPairName,
		SecurityGroupIDs: in.securityGroups,
		InstanceProfile:  in.profileName,
		UserData:         base64.StdEncoding.EncodeToString([]byte(in.userData)),
	}
	for _, v := range c.Volumes {
		lv := launchVolume{Device: v.Name, Type: v.Type, Size: int32(v.Size), Iops: int32(v.Iops), Throughput: int32(v.Throughput),
			SnapshotID: v.SnapshotID, DeleteOnTermination: v.DeleteOnTermination == nil || *v.DeleteOnTermination}
		if v.Encrypted != nil {
			lv.Encrypted = awssdk.Bool(*v.Encrypted)
		}
		d.Volumes = append(d.Volumes, lv)
	}
	if len(c.Volumes) == 0 && c.VolSize > 0 {
		d.Volumes = []launchVolume{{Device: "/dev/xvda", Type: string(ec2types.VolumeTypeGp3), Size: int32(c.VolSize), DeleteOnTermination: true}}
	}
	d.HTTPEndpoint, d.HTTPTokens, d.HTTPHopLimit = launchtemplate.MetadataSettings(c.MetadataOptions)
	if price := spotPrice(ig); price != "" && c.MixedInstancesPolicy == nil {
		d.SpotMaxPrice = price
	}
	if p := c.Placement; p != nil {
		d.AvailabilityZone, d.HostResourceGroupArn, d.Tenancy = p.AvailabilityZone, p.HostResourceGroupArn, p.Tenancy
	}
	d.Licenses = append(d.Licenses, c.LicenseSpecifications...)
	for _, ts := range c.TagSpecifications {
		spec := launchTagSpec{ResourceType: ts.ResourceType}
		for _, t := range ts.Tags {
			spec.Tags = append(spec.Tags, [2]string{t["key"], t["value"]})
		}
		d.TagSpecs = append(d.TagSpecs, spec)
	}
	d.TagSpecs = sortTagSpecs(d.TagSpecs)
	return d
}

// request is d as EC2 RequestLaunchTemplateData.
func (d launchData) request() *ec2types.RequestLaunchTemplateData {
	r := &ec2types.RequestLaunchTemplateData{
		ImageId:            awssdk.String(d.ImageID),
		InstanceType:       ec2types.InstanceType(d.InstanceType),
		SecurityGroupIds:   d.SecurityGroupIDs,
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: awssdk.String(d.InstanceProfile)},
		UserData:           awssdk.String(d.UserData),
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(d.HTTPEndpoint),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(d.HTTPTokens),
			HttpPutResponseHopLimit: awssdk.Int32(d.HTTPHopLimit),
		},
	}
	if d.KeyName != "" {
		r.KeyName = awssdk.String(d.KeyName)
	}
	for _, v := range d.Volumes {
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{DeleteOnTermination: awssdk.Bool(v.DeleteOnTermination), Encrypted: v.Encrypted}
		if v.Type != "" {
			ebs.VolumeType = ec2types.VolumeType(v.Type)
		}
		if v.Size > 0 {
			ebs.VolumeSize = awssdk.Int32(v.Size)
		}
		if v.Iops > 0 {
			ebs.Iops = awssdk.Int32(v.Iops)
		}
		if v.Throughput > 0 {
			ebs.Throughput = awssdk.Int32(v.Throughput)
		}
		if v.SnapshotID != "" {
			ebs.SnapshotId = awssdk.String(v.SnapshotID)
		}
		r.BlockDeviceMappings = append(r.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: awssdk.String(v.Device), Ebs: ebs})
	}
	if d.SpotMaxPrice != "" {
		r.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{
			MarketType:  ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.LaunchTemplateSpotMarketOptionsRequest{MaxPrice: awssdk.String(d.SpotMaxPrice)},
		}
	}
	if d.AvailabilityZone != "" || d.HostResourceGroupArn != "" || d.Tenancy != "" {
		r.Placement = &ec2types.LaunchTemplatePlacementRequest{}
		if d.AvailabilityZone != "" {
			r.Placement.AvailabilityZone = awssdk.String(d.AvailabilityZone)
		}
		if d.HostResourceGroupArn != "" {
			r.Placement.HostResourceGroupArn = awssdk.String(d.HostResourceGroupArn)
		}
		if d.Tenancy != "" {
			r.Placement.Tenancy = ec2types.Tenancy(d.Tenancy)
		}
	}
	for _, l := range d.Licenses {
		r.LicenseSpecifications = append(r.LicenseSpecifications, ec2types.LaunchTemplateLicenseConfigurationRequest{LicenseConfigurationArn: awssdk.String(l)})
	}
	for _, ts := range d.TagSpecs {
		spec := ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceType(ts.ResourceType)}
		for _, t := range ts.Tags {
			spec.Tags = append(spec.Tags, ec2types.Tag{Key: awssdk.String(t[0]), Value: awssdk.String(t[1])})
		}
		r.TagSpecifications = append(r.TagSpecifications, spec)
	}
	return r
}

// launchDataFromStored rebuilds the launch data from a stored version
// (EC2 DescribeLaunchTemplateVersions), reading only the fields
// launchData has. A stored version equal to the desired data needs no new
// version.
func launchDataFromStored(s *ec2types.ResponseLaunchTemplateData) launchData {
	d := launchData{
		ImageID: awssdk.ToString(s.ImageId), InstanceType: string(s.InstanceType), KeyName: awssdk.ToString(s.KeyName),
		SecurityGroupIDs: s.SecurityGroupIds, UserData: awssdk.ToString(s.UserData),
	}
	if p := s.IamInstanceProfile; p != nil {
		d.InstanceProfile = awssdk.ToString(p.Name)
	}
	for _, m := range s.BlockDeviceMappings {
		v := launchVolume{Device: awssdk.ToString(m.DeviceName)}
		if e := m.Ebs; e != nil {
			v.Type, v.Size, v.Iops, v.Throughput = string(e.VolumeType), awssdk.ToInt32(e.VolumeSize), awssdk.ToInt32(e.Iops), awssdk.ToInt32(e.Throughput)
			v.SnapshotID, v.DeleteOnTermination, v.Encrypted = awssdk.ToString(e.SnapshotId), awssdk.ToBool(e.DeleteOnTermination), e.Encrypted
		}
		d.Volumes = append(d.Volumes, v)
	}
	if m := s.MetadataOptions; m != nil {
		d.HTTPEndpoint, d.HTTPTokens, d.HTTPHopLimit = string(m.HttpEndpoint), string(m.HttpTokens), awssdk.ToInt32(m.HttpPutResponseHopLimit)
	}
	if o := s.InstanceMarketOptions; o != nil && o.MarketType == ec2types.MarketTypeSpot && o.SpotOptions != nil {
		d.SpotMaxPrice = awssdk.ToString(o.SpotOptions.MaxPrice)
	}
	if p := s.Placement; p != nil {
		d.AvailabilityZone, d.HostResourceGroupArn, d.Tenancy = awssdk.ToString(p.AvailabilityZone), awssdk.ToString(p.HostResourceGroupArn), string(p.Tenancy)
	}
	for _, l := range s.LicenseSpecifications {
		d.Licenses = append(d.Licenses, awssdk.ToString(l.LicenseConfigurationArn))
	}
	for _, ts := range s.TagSpecifications {
		spec := launchTagSpec{ResourceType: string(ts.ResourceType)}
		for _, t := range ts.Tags {
			spec.Tags = append(spec.Tags, [2]string{awssdk.ToString(t.Key), awssdk.ToString(t.Value)})
		}
		d.TagSpecs = append(d.TagSpecs, spec)
	}
	d.TagSpecs = sortTagSpecs(d.TagSpecs)
	return d
}

// sameAsStored reports whether the template's default version, written by
// an earlier controller version (legacyDescription), already carries
// want: then it is kept, so an upgrade of the controller rotates no node.
// A stored version that differs in any field launchData has is not the
// same (a new version follows, as for any change).
func sameAsStored(st templateState, want launchData) bool {
	if !st.exists || st.data == nil || !legacyDescription(st.description) {
		return false
	}
	return string(launchDataFromStored(st.data).encode()) == string(want.encode())
}
