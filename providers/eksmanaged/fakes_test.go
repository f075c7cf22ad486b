package eksmanaged

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeEKS is the managed node group subset of EKS as AWS behaves: a node
// group is CREATING, UPDATING or DELETING until settle() is called, and an
// update is refused (ResourceInUseException) while one is in progress.
// moto 5.2.5 does not implement UpdateNodegroupVersion (404, see
// providers/aws/MOTO.md) and makes every change take effect at once, so
// the version update and the in-progress rules are tested here.
type fakeEKS struct {
	awsp.EKSAPI // calls outside the subset panic
	clusters    map[string]bool
	groups      map[string]*ekstypes.Nodegroup
	calls       []string
	// updates are the version updates by id, pending the node groups'
	// in progress; failNext makes the next version update fail at
	// settle() (EKS: PodEvictionFailure after 15 minutes), the node
	// group left on its versions as before.
	updates  map[string]*ekstypes.Update
	byGroup  map[string][]string
	pending  map[string]pendingUpdate
	failNext *ekstypes.ErrorDetail
	// listErr, when set, answers ListUpdates (a policy without
	// eks:ListUpdates, an emulator without the call).
	listErr error
	// historyReads counts ListUpdates and DescribeUpdate calls.
	historyReads int
}

type pendingUpdate struct {
	id               string
	version, release *string
	template         *ekstypes.LaunchTemplateSpecification
	fail             *ekstypes.ErrorDetail
}

func (f *fakeEKS) ListUpdates(_ context.Context, in *eks.ListUpdatesInput, _ ...func(*eks.Options)) (*eks.ListUpdatesOutput, error) {
	f.historyReads++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return &eks.ListUpdatesOutput{UpdateIds: f.byGroup[awssdk.ToString(in.NodegroupName)]}, nil
}

func (f *fakeEKS) DescribeUpdate(_ context.Context, in *eks.DescribeUpdateInput, _ ...func(*eks.Options)) (*eks.DescribeUpdateOutput, error) {
	f.historyReads++
	u, ok := f.updates[awssdk.ToString(in.UpdateId)]
	if !ok {
		return nil, notFound()
	}
	c := *u
	return &eks.DescribeUpdateOutput{Update: &c}, nil
}

func newFakeEKS() *fakeEKS {
	return &fakeEKS{clusters: map[string]bool{"prod": true}, groups: map[string]*ekstypes.Nodegroup{}}
}

func notFound() error {
	return &ekstypes.ResourceNotFoundException{Message: awssdk.String("not found")}
}

func inUse() error {
	return &ekstypes.ResourceInUseException{Message: awssdk.String("update in progress")}
}

func (f *fakeEKS) CreateNodegroup(_ context.Context, in *eks.CreateNodegroupInput, _ ...func(*eks.Options)) (*eks.CreateNodegroupOutput, error) {
	f.calls = append(f.calls, "CreateNodegroup "+*in.NodegroupName)
	if !f.clusters[*in.ClusterName] {
		return nil, notFound()
	}
	if _, ok := f.groups[*in.NodegroupName]; ok {
		return nil, inUse()
	}
	ng := &ekstypes.Nodegroup{
		ClusterName: in.ClusterName, NodegroupName: in.NodegroupName, NodeRole: in.NodeRole, Subnets: in.Subnets,
		ScalingConfig: in.ScalingConfig, InstanceTypes: in.InstanceTypes, AmiType: in.AmiType, DiskSize: in.DiskSize,
		RemoteAccess: in.RemoteAccess, Labels: in.Labels, Taints: in.Taints, Tags: in.Tags, CapacityType: in.CapacityType,
		Version: in.Version, ReleaseVersion: in.ReleaseVersion, Status: ekstypes.NodegroupStatusCreating,
		NodegroupArn: awssdk.String(nodegroupARN(*in.ClusterName, *in.NodegroupName)),
	}
	if lt := in.LaunchTemplate; lt != nil {
		// EKS's rules for a launch template (as moto checks them too).
		if in.DiskSize != nil || in.RemoteAccess != nil {
			return nil, &ekstypes.InvalidParameterException{Message: awssdk.String("disk size or remote access with a launch template")}
		}
		c := *lt
		ng.LaunchTemplate = &c
	}
	if ng.Version == nil {
		ng.Version = awssdk.String("1.29") // the cluster's
	}
	if ng.ReleaseVersion == nil {
		ng.ReleaseVersion = awssdk.String(*ng.Version + ".0-20240101")
	}
	f.groups[*in.NodegroupName] = ng
	return &eks.CreateNodegroupOutput{Nodegroup: copyGroup(ng)}, nil
}

func nodegroupARN(cluster, name string) string {
	return "arn:aws:eks:us-west-2:123456789012:nodegroup/" + cluster + "/" + name + "/0a1b2c3d"
}

// ListNodegroups lists the names in pages of two, sorted, so paging is
// exercised.
func (f *fakeEKS) ListNodegroups(_ context.Context, in *eks.ListNodegroupsInput, _ ...func(*eks.Options)) (*eks.ListNodegroupsOutput, error) {
	if !f.clusters[*in.ClusterName] {
		return nil, notFound()
	}
	var names []string
	for n, ng := range f.groups {
		if *ng.ClusterName == *in.ClusterName && n > awssdk.ToString(in.NextToken) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := &eks.ListNodegroupsOutput{Nodegroups: names}
	if len(names) > 2 {
		out.Nodegroups, out.NextToken = names[:2], awssdk.String(names[1])
	}
	return out, nil
}

func (f *fakeEKS) byARN(arn string) *ekstypes.Nodegroup {
	for _, ng := range f.groups {
		if awssdk.ToString(ng.NodegroupArn) == arn {
			return ng
		}
	}
	return nil
}

func (f *fakeEKS) TagResource(_ context.Context, in *eks.TagResourceInput, _ ...func(*eks.Options)) (*eks.TagResourceOutput, error) {
	keys := make([]string, 0, len(in.Tags))
	for k := range in.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f.calls = append(f.calls, "TagResource "+strings.Join(keys, ","))
	ng := f.byARN(*in.ResourceArn)
	if ng == nil {
		return nil, notFound()
	}
	for k, v := range in.Tags {
		ng.Tags[k] = v
	}
	return &eks.TagResourceOutput{}, nil
}

func (f *fakeEKS) UntagResource(_ context.Context, in *eks.UntagResourceInput, _ ...func(*eks.Options)) (*eks.UntagResourceOutput, error) {
	f.calls = append(f.calls, "UntagResource "+strings.Join(in.TagKeys, ","))
	ng := f.byARN(*in.ResourceArn)
	if ng == nil {
		return nil, notFound()
	}
	for _, k := range in.TagKeys {
		delete(ng.Tags, k)
	}
	return &eks.UntagResourceOutput{}, nil
}

func (f *fakeEKS) DescribeNodegroup(_ context.Context, in *eks.DescribeNodegroupInput, _ ...func(*eks.Options)) (*eks.DescribeNodegroupOutput, error) {
	ng, ok := f.groups[*in.NodegroupName]
	if !ok || !f.clusters[*in.ClusterName] {
		return nil, notFound()
	}
	return &eks.DescribeNodegroupOutput{Nodegroup: copyGroup(ng)}, nil
}

func (f *fakeEKS) UpdateNodegroupConfig(_ context.Context, in *eks.UpdateNodegroupConfigInput, _ ...func(*eks.Options)) (*eks.UpdateNodegroupConfigOutput, error) {
	f.calls = append(f.calls, "UpdateNodegroupConfig")
	ng, ok := f.groups[*in.NodegroupName]
	if !ok {
		return nil, notFound()
	}
	if ng.Status != ekstypes.NodegroupStatusActive {
		return nil, inUse()
	}
	if in.ScalingConfig != nil {
		ng.ScalingConfig = in.ScalingConfig
	}
	if l := in.Labels; l != nil {
		for k, v := range l.AddOrUpdateLabels {
			ng.Labels[k] = v
		}
		for _, k := range l.RemoveLabels {
			delete(ng.Labels, k)
		}
	}
	if t := in.Taints; t != nil {
		id := func(t ekstypes.Taint) string { return *t.Key + string(t.Effect) }
		drop := map[string]bool{}
		for _, x := range append(append([]ekstypes.Taint(nil), t.RemoveTaints...), t.AddOrUpdateTaints...) {
			drop[id(x)] = true
		}
		var kept []ekstypes.Taint
		for _, x := range ng.Taints {
			if !drop[id(x)] {
				kept = append(kept, x)
			}
		}
		ng.Taints = append(kept, t.AddOrUpdateTaints...)
	}
	ng.Status = ekstypes.NodegroupStatusUpdating
	return &eks.UpdateNodegroupConfigOutput{}, nil
}

func (f *fakeEKS) UpdateNodegroupVersion(_ context.Context, in *eks.UpdateNodegroupVersionInput, _ ...func(*eks.Options)) (*eks.UpdateNodegroupVersionOutput, error) {
	f.calls = append(f.calls, "UpdateNodegroupVersion "+awssdk.ToString(in.Version)+" "+awssdk.ToString(in.ReleaseVersion))
	if in.Force {
		f.calls[len(f.calls)-1] += " force"
	}
	ng, ok := f.groups[*in.NodegroupName]
	if !ok {
		return nil, notFound()
	}
	if ng.Status != ekstypes.NodegroupStatusActive {
		return nil, inUse()
	}
	if in.Version == nil {
		return nil, &ekstypes.InvalidParameterException{Message: awssdk.String("the fake wants an explicit version")}
	}
	if *in.Version == "9.99" {
		return nil, &ekstypes.InvalidParameterException{Message: awssdk.String("Requested Nodegroup release version 9.99 is invalid")}
	}
	if lt := in.LaunchTemplate; lt != nil {
		if ng.LaunchTemplate == nil || awssdk.ToString(ng.LaunchTemplate.Id) != awssdk.ToString(lt.Id) {
			return nil, &ekstypes.InvalidParameterException{Message: awssdk.String("a node group keeps the launch template it was created with")}
		}
		c := *lt
		ng.LaunchTemplate = &c
		f.calls[len(f.calls)-1] += " template " + awssdk.ToString(lt.Version)
	}
	if f.updates == nil {
		f.updates, f.byGroup, f.pending = map[string]*ekstypes.Update{}, map[string][]string{}, map[string]pendingUpdate{}
	}
	id := fmt.Sprintf("update-%d", len(f.updates)+1)
	params := []ekstypes.UpdateParam{{Type: ekstypes.UpdateParamTypeVersion, Value: in.Version}}
	if in.ReleaseVersion != nil {
		params = append(params, ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeReleaseVersion, Value: in.ReleaseVersion})
	}
	if in.LaunchTemplate != nil {
		params = append(params, ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeLaunchTemplateVersion, Value: in.LaunchTemplate.Version})
	}
	f.updates[id] = &ekstypes.Update{Id: awssdk.String(id), Type: ekstypes.UpdateTypeVersionUpdate, Status: ekstypes.UpdateStatusInProgress, Params: params,
		CreatedAt: awssdk.Time(time.Unix(int64(len(f.updates)), 0))}
	f.byGroup[*in.NodegroupName] = append([]string{id}, f.byGroup[*in.NodegroupName]...)
	f.pending[*in.NodegroupName] = pendingUpdate{id: id, version: ng.Version, release: ng.ReleaseVersion, template: ng.LaunchTemplate, fail: f.failNext}
	f.failNext = nil
	ng.Version = in.Version
	ng.ReleaseVersion = awssdk.String(*in.Version + ".9-latest")
	if in.ReleaseVersion != nil {
		ng.ReleaseVersion = in.ReleaseVersion
	}
	ng.Status = ekstypes.NodegroupStatusUpdating
	return &eks.UpdateNodegroupVersionOutput{Update: &ekstypes.Update{Id: awssdk.String(id), Status: ekstypes.UpdateStatusInProgress}}, nil
}

func (f *fakeEKS) DeleteNodegroup(_ context.Context, in *eks.DeleteNodegroupInput, _ ...func(*eks.Options)) (*eks.DeleteNodegroupOutput, error) {
	f.calls = append(f.calls, "DeleteNodegroup "+*in.NodegroupName)
	ng, ok := f.groups[*in.NodegroupName]
	if !ok {
		return nil, notFound()
	}
	ng.Status = ekstypes.NodegroupStatusDeleting
	return &eks.DeleteNodegroupOutput{Nodegroup: copyGroup(ng)}, nil
}

// settle finishes what EKS was doing: CREATING and UPDATING become
// ACTIVE, DELETING node groups disappear.
func (f *fakeEKS) settle() {
	for name, ng := range f.groups {
		switch ng.Status {
		case ekstypes.NodegroupStatusCreating, ekstypes.NodegroupStatusUpdating:
			ng.Status = ekstypes.NodegroupStatusActive
			if u, ok := f.pending[name]; ok {
				delete(f.pending, name)
				f.updates[u.id].Status = ekstypes.UpdateStatusSuccessful
				if u.fail != nil {
					f.updates[u.id].Status, f.updates[u.id].Errors = ekstypes.UpdateStatusFailed, []ekstypes.ErrorDetail{*u.fail}
					ng.Version, ng.ReleaseVersion, ng.LaunchTemplate = u.version, u.release, u.template
				}
			}
		case ekstypes.NodegroupStatusDeleting:
			delete(f.groups, name)
		}
	}
}

// takeCalls returns the mutating calls since the last takeCalls.
func (f *fakeEKS) takeCalls() []string {
	out := f.calls
	f.calls = nil
	return out
}

func copyGroup(ng *ekstypes.Nodegroup) *ekstypes.Nodegroup {
	c := *ng
	c.Labels = map[string]string{}
	for k, v := range ng.Labels {
		c.Labels[k] = v
	}
	c.Taints = append([]ekstypes.Taint(nil), ng.Taints...)
	c.Tags = maps.Clone(ng.Tags)
	s := *ng.ScalingConfig
	c.ScalingConfig = &s
	return &c
}

// fakeEC2 knows subnets and security groups by id and Name tag, and
// holds launch templates.
type fakeEC2 struct {
	awsp.EC2API
	subnets   map[string]string // id -> Name
	groups    map[string]string // id -> Name
	templates map[string]*fakeTemplate
}

// fakeTemplate is a launch template: its tags and versions (data and
// description), version n at index n-1.
type fakeTemplate struct {
	id, name string
	tags     []ec2types.Tag
	versions []ec2types.ResponseLaunchTemplateData
	descs    []string
}

func templateNotFound() error {
	return &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "not found"}
}

func (f *fakeEC2) template(name, id *string) *fakeTemplate {
	for _, t := range f.templates {
		if t.name == awssdk.ToString(name) || t.id == awssdk.ToString(id) {
			return t
		}
	}
	return nil
}

// stored is the data EC2 keeps of a request (the fields the controller
// writes).
func stored(d *ec2types.RequestLaunchTemplateData) ec2types.ResponseLaunchTemplateData {
	out := ec2types.ResponseLaunchTemplateData{}
	if m := d.MetadataOptions; m != nil {
		out.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptions{HttpEndpoint: m.HttpEndpoint, HttpTokens: m.HttpTokens, HttpPutResponseHopLimit: m.HttpPutResponseHopLimit}
	}
	for _, b := range d.BlockDeviceMappings {
		out.BlockDeviceMappings = append(out.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMapping{DeviceName: b.DeviceName,
			Ebs: &ec2types.LaunchTemplateEbsBlockDevice{VolumeSize: b.Ebs.VolumeSize, VolumeType: b.Ebs.VolumeType}})
	}
	if d.IamInstanceProfile != nil || d.InstanceType != "" || d.ImageId != nil || d.UserData != nil || d.KeyName != nil {
		panic("a managed node group's launch template with a field EKS forbids or the controller does not set")
	}
	return out
}

func (f *fakeEC2) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	if f.template(in.LaunchTemplateName, nil) != nil {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.AlreadyExistsException"}
	}
	if f.templates == nil {
		f.templates = map[string]*fakeTemplate{}
	}
	t := &fakeTemplate{id: fmt.Sprintf("lt-%d", len(f.templates)+1), name: *in.LaunchTemplateName,
		versions: []ec2types.ResponseLaunchTemplateData{stored(in.LaunchTemplateData)}, descs: []string{awssdk.ToString(in.VersionDescription)}}
	for _, s := range in.TagSpecifications {
		t.tags = append(t.tags, s.Tags...)
	}
	f.templates[t.id] = t
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: &t.id, LaunchTemplateName: &t.name, LatestVersionNumber: awssdk.Int64(1)}}, nil
}

func (f *fakeEC2) CreateLaunchTemplateVersion(_ context.Context, in *ec2.CreateLaunchTemplateVersionInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateVersionOutput, error) {
	t := f.template(in.LaunchTemplateName, in.LaunchTemplateId)
	if t == nil {
		return nil, templateNotFound()
	}
	t.versions, t.descs = append(t.versions, stored(in.LaunchTemplateData)), append(t.descs, awssdk.ToString(in.VersionDescription))
	return &ec2.CreateLaunchTemplateVersionOutput{LaunchTemplateVersion: &ec2types.LaunchTemplateVersion{LaunchTemplateId: &t.id, VersionNumber: awssdk.Int64(int64(len(t.versions)))}}, nil
}

func (f *fakeEC2) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	t := f.template(in.LaunchTemplateName, in.LaunchTemplateId)
	if t == nil {
		return nil, templateNotFound()
	}
	n := len(t.versions)
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{LaunchTemplateId: &t.id, LaunchTemplateName: &t.name,
		VersionNumber: awssdk.Int64(int64(n)), VersionDescription: awssdk.String(t.descs[n-1]), LaunchTemplateData: &t.versions[n-1]}}}, nil
}

func (f *fakeEC2) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	out := &ec2.DescribeLaunchTemplatesOutput{}
	if len(in.Filters) > 0 { // tag filters, as the garbage collector lists: no match is an empty answer
		for _, t := range f.templates {
			if tagsMatch(t.tags, in.Filters) {
				out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{LaunchTemplateId: &t.id, LaunchTemplateName: &t.name, Tags: t.tags})
			}
		}
		return out, nil
	}
	for _, t := range f.templates {
		if slices.Contains(in.LaunchTemplateNames, t.name) || slices.Contains(in.LaunchTemplateIds, t.id) {
			out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{LaunchTemplateId: &t.id, LaunchTemplateName: &t.name, Tags: t.tags})
		}
	}
	if len(out.LaunchTemplates) == 0 {
		return nil, templateNotFound()
	}
	return out, nil
}

func (f *fakeEC2) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	if f.templates[awssdk.ToString(in.LaunchTemplateId)] == nil {
		return nil, templateNotFound()
	}
	delete(f.templates, *in.LaunchTemplateId)
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

func matching(all map[string]string, filters []ec2types.Filter) []string {
	var out []string
	for id, name := range all {
		for _, f := range filters {
			for _, v := range f.Values {
				if (*f.Name == "tag:Name" && v == name) || (*f.Name != "tag:Name" && v == id) {
					out = append(out, id)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, id := range matching(f.subnets, in.Filters) {
		out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: awssdk.String(id),
			Tags: []ec2types.Tag{{Key: awssdk.String("Name"), Value: awssdk.String(f.subnets[id])}}})
	}
	return out, nil
}

func (f *fakeEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	out := &ec2.DescribeSecurityGroupsOutput{}
	for _, id := range matching(f.groups, in.Filters) {
		out.SecurityGroups = append(out.SecurityGroups, ec2types.SecurityGroup{GroupId: awssdk.String(id),
			Tags: []ec2types.Tag{{Key: awssdk.String("Name"), Value: awssdk.String(f.groups[id])}}})
	}
	return out, nil
}

// fakeIAM holds roles with their tags and attached policies.
type fakeIAM struct {
	awsp.IAMAPI
	roles map[string]*fakeRole
}

type fakeRole struct {
	tags     []iamtypes.Tag
	policies map[string]bool
}

func noSuchEntity() error {
	return &iamtypes.NoSuchEntityException{Message: awssdk.String("no such entity")}
}

func (f *fakeIAM) arn(name string) *string {
	return awssdk.String("arn:aws:iam::123456789012:role/" + name)
}

func (f *fakeIAM) GetRole(_ context.Context, in *iam.GetRoleInput, _ ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	r, ok := f.roles[*in.RoleName]
	if !ok {
		return nil, noSuchEntity()
	}
	return &iam.GetRoleOutput{Role: &iamtypes.Role{RoleName: in.RoleName, Arn: f.arn(*in.RoleName), Tags: r.tags}}, nil
}

func (f *fakeIAM) CreateRole(_ context.Context, in *iam.CreateRoleInput, _ ...func(*iam.Options)) (*iam.CreateRoleOutput, error) {
	f.roles[*in.RoleName] = &fakeRole{tags: in.Tags, policies: map[string]bool{}}
	return &iam.CreateRoleOutput{Role: &iamtypes.Role{RoleName: in.RoleName, Arn: f.arn(*in.RoleName), Tags: in.Tags}}, nil
}

func (f *fakeIAM) ListAttachedRolePolicies(_ context.Context, in *iam.ListAttachedRolePoliciesInput, _ ...func(*iam.Options)) (*iam.ListAttachedRolePoliciesOutput, error) {
	r, ok := f.roles[*in.RoleName]
	if !ok {
		return nil, noSuchEntity()
	}
	out := &iam.ListAttachedRolePoliciesOutput{}
	for p := range r.policies {
		out.AttachedPolicies = append(out.AttachedPolicies, iamtypes.AttachedPolicy{PolicyArn: awssdk.String(p)})
	}
	return out, nil
}

func (f *fakeIAM) AttachRolePolicy(_ context.Context, in *iam.AttachRolePolicyInput, _ ...func(*iam.Options)) (*iam.AttachRolePolicyOutput, error) {
	f.roles[*in.RoleName].policies[*in.PolicyArn] = true
	return &iam.AttachRolePolicyOutput{}, nil
}

func (f *fakeIAM) DetachRolePolicy(_ context.Context, in *iam.DetachRolePolicyInput, _ ...func(*iam.Options)) (*iam.DetachRolePolicyOutput, error) {
	delete(f.roles[*in.RoleName].policies, *in.PolicyArn)
	return &iam.DetachRolePolicyOutput{}, nil
}

func (f *fakeIAM) DeleteRole(_ context.Context, in *iam.DeleteRoleInput, _ ...func(*iam.Options)) (*iam.DeleteRoleOutput, error) {
	r, ok := f.roles[*in.RoleName]
	if !ok {
		return nil, noSuchEntity()
	}
	if len(r.policies) > 0 {
		return nil, &iamtypes.DeleteConflictException{Message: awssdk.String("policies attached")}
	}
	delete(f.roles, *in.RoleName)
	return &iam.DeleteRoleOutput{}, nil
}

// tagsMatch reports whether tags satisfy every "tag:<key>" filter.
func tagsMatch(tags []ec2types.Tag, filters []ec2types.Filter) bool {
	for _, f := range filters {
		key, ok := strings.CutPrefix(awssdk.ToString(f.Name), "tag:")
		if !ok {
			return false
		}
		if !slices.ContainsFunc(tags, func(t ec2types.Tag) bool {
			return awssdk.ToString(t.Key) == key && slices.Contains(f.Values, awssdk.ToString(t.Value))
		}) {
			return false
		}
	}
	return true
}

// TagRole adds or replaces the role's tags (IAM TagRole).
func (f *fakeIAM) TagRole(_ context.Context, in *iam.TagRoleInput, _ ...func(*iam.Options)) (*iam.TagRoleOutput, error) {
	r, ok := f.roles[*in.RoleName]
	if !ok {
		return nil, noSuchEntity()
	}
	for _, t := range in.Tags {
		r.tags = slices.DeleteFunc(r.tags, func(x iamtypes.Tag) bool { return *x.Key == *t.Key })
		r.tags = append(r.tags, t)
	}
	return &iam.TagRoleOutput{}, nil
}

// CreateTags adds or replaces the tags of launch templates (EC2
// CreateTags, resources by template id).
func (f *fakeEC2) CreateTags(_ context.Context, in *ec2.CreateTagsInput, _ ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	for _, id := range in.Resources {
		t := f.templates[id]
		if t == nil {
			return nil, templateNotFound()
		}
		for _, tag := range in.Tags {
			t.tags = slices.DeleteFunc(t.tags, func(x ec2types.Tag) bool { return *x.Key == *tag.Key })
			t.tags = append(t.tags, tag)
		}
	}
	return &ec2.CreateTagsOutput{}, nil
}
