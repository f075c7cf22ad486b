package eksmanaged

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// A managed node group's launch template (issue 25, N4). Without one, EKS
// generates a template whose instance metadata settings are EKS's (a PUT
// response hop limit of 2 is reported for AL2 AMI types): pods could read
// the node role's credentials. The controller gives every node group it
// creates without SSH remote access a launch template of its own, with
// IMDSv2 required and a hop limit of 1 (launchtemplate.DefaultHTTPTokens,
// launchtemplate.DefaultHTTPHopLimit, as the eks provisioner's templates have) and
// the disk size as the root volume. It follows EKS's rules for launch
// templates of managed node groups ("Customize managed nodes with launch
// templates", EKS User Guide): no IAM instance profile (EKS uses the node
// role), no instance type (the node group's instanceTypes say it), no
// subnet, no image (EKS's AMI for amiType and the versions), no user data,
// no security groups (EKS adds the cluster's), and the node group gets
// neither diskSize nor remoteAccess. EKS prohibits remoteAccess with a
// launch template, so a group with keyPairName keeps EKS's template (see
// docs/concepts.md, "How the eks-managed provisioner builds a group").

// templateDescriptionPrefix starts the description of every version the
// controller writes, followed by the hash of its launchSettings.
const templateDescriptionPrefix = "instance-manager-managed:"

// templateRef is the launch template version a node group uses.
type templateRef struct {
	id, name, version string
}

// launchSettings is what the controller writes into a managed node
// group's launch template; its JSON, in this field order, is hashed into
// the version description, so a change of it is a new version.
type launchSettings struct {
	HTTPEndpoint string `json:"httpEndpoint"`
	HTTPTokens   string `json:"httpTokens"`
	HopLimit     int32  `json:"hopLimit"`
	Device       string `json:"device,omitempty"`   // the volume diskSize sizes
	DiskSize     int32  `json:"diskSize,omitempty"` // GiB
}

// settingsOf is the launch settings of ng: the eks provisioner's IMDS
// defaults and, when the spec sets volSize, the volume of ng's AMI type
// that EKS's diskSize would size.
func settingsOf(ng nodegroup) launchSettings {
	s := launchSettings{HTTPEndpoint: "enabled", HTTPTokens: launchtemplate.DefaultHTTPTokens, HopLimit: launchtemplate.DefaultHTTPHopLimit}
	if ng.diskSize > 0 {
		s.Device, s.DiskSize = diskDevice(ng.amiType), ng.diskSize
	}
	return s
}

// diskDevice is the block device EKS's diskSize sizes for an AMI type:
// Bottlerocket's data volume, Windows' root volume, else the Amazon Linux
// root volume (also for an AMI type EKS chooses).
func diskDevice(amiType string) string {
	switch {
	case strings.HasPrefix(amiType, "BOTTLEROCKET_"):
		return "/dev/xvdb"
	case strings.HasPrefix(amiType, "WINDOWS_"):
		return "/dev/sda1"
	}
	return "/dev/xvda"
}

func (s launchSettings) description() string {
	b, _ := json.Marshal(s) // strings and ints only: cannot fail
	sum := sha256.Sum256(b)
	return templateDescriptionPrefix + hex.EncodeToString(sum[:8])
}

// request is the launch template data of s.
func (s launchSettings) request() *ec2types.RequestLaunchTemplateData {
	d := &ec2types.RequestLaunchTemplateData{MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(s.HTTPEndpoint),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(s.HTTPTokens),
		HttpPutResponseHopLimit: awssdk.Int32(s.HopLimit),
	}}
	if s.DiskSize > 0 {
		d.BlockDeviceMappings = []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: awssdk.String(s.Device),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: awssdk.Int32(s.DiskSize), VolumeType: ec2types.VolumeTypeGp3}}}
	}
	return d
}

// templateName is the group's launch template: "mng-" and ownership.Name
// within the 128 characters EC2 allows (the prefix keeps it apart from an
// eks group's template of the same group, eks.GroupName).
func templateName(ig *v1alpha1.InstanceGroup) string {
	c := ig.Spec.EKSManaged.Configuration
	return "mng-" + ownership.Name(ownership.LimitLaunchTemplate-4, c.ClusterName, ig.Namespace, ig.Name)
}

// TemplateName is the launch template a managed group uses, for the
// garbage collector (which must not collect it).
func TemplateName(ig *v1alpha1.InstanceGroup) string { return templateName(ig) }

// ensureTemplate makes the latest version of the group's launch template
// carry want (EC2 DescribeLaunchTemplateVersions of $Latest; then
// CreateLaunchTemplate with the ownership tags, or, when the latest
// version's description is not want's, CreateLaunchTemplateVersion) and
// returns it. A template of the name that is not the group's (ownership
// tags, EC2 DescribeLaunchTemplates once per template id) is an
// *ownership.ForeignError and is never written.
func (p *Provisioner) ensureTemplate(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster string, want launchSettings) (templateRef, error) {
	api, name := p.aws.EC2, templateName(ig)
	out, err := api.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String(name), Versions: []string{"$Latest"}})
	if err != nil && !launchtemplate.IsNotFound(err) {
		return templateRef{}, fmt.Errorf("ec2 DescribeLaunchTemplateVersions %s: %w", name, err)
	}
	owner := ownership.OwnerOf(ig, cluster)
	if err != nil || len(out.LaunchTemplateVersions) == 0 {
		tags := owner.Tags()
		created, err := api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: awssdk.String(name), LaunchTemplateData: want.request(), VersionDescription: awssdk.String(want.description()),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ownership.EC2Tags(tags)}},
		})
		if err != nil {
			return templateRef{}, fmt.Errorf("ec2 CreateLaunchTemplate %s: %w", name, err)
		}
		lt := created.LaunchTemplate
		p.templates.Store(name+"/"+string(ig.UID), awssdk.ToString(lt.LaunchTemplateId))
		return templateRef{id: awssdk.ToString(lt.LaunchTemplateId), name: name, version: strconv.FormatInt(awssdk.ToInt64(lt.LatestVersionNumber), 10)}, nil
	}
	latest := out.LaunchTemplateVersions[0]
	ref := templateRef{id: awssdk.ToString(latest.LaunchTemplateId), name: name, version: strconv.FormatInt(awssdk.ToInt64(latest.VersionNumber), 10)}
	if err := p.checkTemplateOwner(ctx, ig, owner, ref); err != nil {
		return templateRef{}, err
	}
	if awssdk.ToString(latest.VersionDescription) == want.description() {
		return ref, nil
	}
	v, err := api.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: awssdk.String(ref.id),
		LaunchTemplateData: want.request(), VersionDescription: awssdk.String(want.description())})
	if err != nil {
		return templateRef{}, fmt.Errorf("ec2 CreateLaunchTemplateVersion %s: %w", name, err)
	}
	ref.version = strconv.FormatInt(awssdk.ToInt64(v.LaunchTemplateVersion.VersionNumber), 10)
	return ref, nil
}

// checkTemplateOwner returns an *ownership.ForeignError unless the
// template's ownership tags name the group (EC2 DescribeLaunchTemplates;
// remembered per template id). One an earlier InstanceGroup of the same
// name left is adopted (providers.Adopt; retagged with EC2 CreateTags).
func (p *Provisioner) checkTemplateOwner(ctx context.Context, ig *v1alpha1.InstanceGroup, owner ownership.Owner, ref templateRef) error {
	key := ref.name + "/" + string(ig.UID)
	if id, ok := p.templates.Load(key); ok && id == ref.id {
		return nil
	}
	out, err := p.aws.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{ref.id}})
	if err != nil {
		return fmt.Errorf("ec2 DescribeLaunchTemplates %s: %w", ref.name, err)
	}
	for _, lt := range out.LaunchTemplates {
		retag := func(ctx context.Context, tags map[string]string) error {
			if _, err := p.aws.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{ref.id}, Tags: ownership.EC2Tags(tags)}); err != nil {
				return fmt.Errorf("ec2 CreateTags %s: %w", ref.name, err)
			}
			return nil
		}
		if _, err := providers.Adopt(ctx, p.adopt, owner, "launch template", ref.name, ownership.EC2TagMap(lt.Tags), retag); err != nil {
			return err
		}
	}
	p.templates.Store(key, ref.id)
	return nil
}

// deleteTemplate deletes the group's launch template when its ownership
// tags name the group (EC2 DescribeLaunchTemplates, DeleteLaunchTemplate);
// a template of the name that is someone else's, or none, is left.
func (p *Provisioner) deleteTemplate(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster string) error {
	name := templateName(ig)
	out, err := p.aws.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if launchtemplate.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ec2 DescribeLaunchTemplates %s: %w", name, err)
	}
	for _, lt := range out.LaunchTemplates {
		if ownership.OwnerOf(ig, cluster).Check("launch template", name, ownership.EC2TagMap(lt.Tags)) != nil {
			continue
		}
		if _, err := p.aws.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !launchtemplate.IsNotFound(err) {
			return fmt.Errorf("ec2 DeleteLaunchTemplate %s: %w", name, err)
		}
	}
	p.templates.Delete(name + "/" + string(ig.UID))
	return nil
}
