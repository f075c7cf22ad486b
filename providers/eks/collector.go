package eks

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Resource kinds of the GC's metrics.
const (
	KindScalingGroup = "auto-scaling-group"
	KindRole         = "iam-role"
)

var _ providers.Collector = (*Provisioner)(nil)

// Owned lists this installation's Auto Scaling groups and launch
// templates: one paginated DescribeAutoScalingGroups and one paginated
// DescribeLaunchTemplates, both filtered by the installation tag
// (ownership.TagInstallation), for the whole region whatever clusters
// says, each kept when ownership.Recorded reads an owner from its tags.
// Launch templates are kept only under the names an eks group gives them
// (GroupName, of either scheme): another provisioner's (eks-managed's)
// are its own to collect. Groups being deleted are left out.
func (p *Provisioner) Owned(ctx context.Context, _ []string) ([]providers.Owned, error) {
	filter := "tag:" + ownership.TagInstallation
	id := ownership.Installation()
	if id == "" {
		return nil, nil
	}
	var out []providers.Owned
	groups := autoscaling.NewDescribeAutoScalingGroupsPaginator(p.aws.AutoScaling, &autoscaling.DescribeAutoScalingGroupsInput{
		Filters: []astypes.Filter{{Name: awssdk.String(filter), Values: []string{id}}}, MaxRecords: awssdk.Int32(100)})
	for groups.HasMorePages() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (installation %s): %w", id, err)
		}
		for _, g := range page.AutoScalingGroups {
			if awssdk.ToString(g.Status) == "Delete in progress" {
				continue
			}
			tags := ownership.TagMap(g.Tags, func(t astypes.TagDescription) *string { return t.Key }, func(t astypes.TagDescription) *string { return t.Value })
			if o, ok := ownership.Recorded(tags); ok {
				out = append(out, providers.Owned{Kind: KindScalingGroup, Name: awssdk.ToString(g.AutoScalingGroupName), Owner: o, Tags: tags,
					Created: awssdk.ToTime(g.CreatedTime)})
			}
		}
	}
	templates := ec2.NewDescribeLaunchTemplatesPaginator(p.aws.EC2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: awssdk.String(filter), Values: []string{id}}}})
	for templates.HasMorePages() {
		page, err := templates.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeLaunchTemplates (installation %s): %w", id, err)
		}
		for _, lt := range page.LaunchTemplates {
			tags := ownership.EC2TagMap(lt.Tags)
			name := awssdk.ToString(lt.LaunchTemplateName)
			if o, ok := ownership.Recorded(tags); ok && templateOf(o, name) {
				out = append(out, providers.Owned{Kind: launchtemplate.Kind, Name: name, ID: awssdk.ToString(lt.LaunchTemplateId), Owner: o, Tags: tags,
					Created: awssdk.ToTime(lt.CreateTime), Dependent: true})
			}
		}
	}
	return out, nil
}

// templateOf reports whether name is a launch template name an eks group
// of o would have (GroupName, this version's scheme or the earlier one).
func templateOf(o ownership.Owner, name string) bool {
	ig := orphanGroup(o)
	return name == ownership.Name(ownership.LimitLaunchTemplate, o.Cluster, o.Namespace, o.Name) || name == legacyName(ig, ownership.LimitLaunchTemplate)
}

// orphanGroup is the eks InstanceGroup o's tags record, as far as names
// and ownership checks need it.
func orphanGroup(o ownership.Owner) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS,
			EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: o.Cluster}}},
	}
}

// Builds returns why live no longer builds r: another provisioner,
// cluster or name (GroupName), or, deleted and created again under
// another UID, a resource it will not adopt (ownership.Owner.Adoptable:
// the eks provisioner's Apply adopts what an earlier group of the name
// left, so that is not swept from under it).
func (p *Provisioner) Builds(live *v1alpha1.InstanceGroup, r providers.Owned) string {
	o := r.Owner
	if pr := live.Spec.Provisioner; pr != v1alpha1.ProvisionerEKS && pr != v1alpha1.ProvisionerEKSCF {
		return fmt.Sprintf("InstanceGroup %s now uses provisioner %q", o, pr)
	}
	if live.Spec.EKS == nil || live.Spec.EKS.Configuration == nil {
		return ""
	}
	if c := live.Spec.EKS.Configuration.ClusterName; c != o.Cluster {
		return fmt.Sprintf("InstanceGroup %s now builds in cluster %q", o, c)
	}
	if want := GroupName(live); want != r.Name {
		return fmt.Sprintf("InstanceGroup %s now uses %s", o, want)
	}
	if o.UID != "" && live.UID != o.UID {
		if _, adoptable := (ownership.Owner{Cluster: o.Cluster, Namespace: o.Namespace, Name: o.Name, UID: live.UID}).Adoptable(r.Tags); !adoptable {
			return fmt.Sprintf("InstanceGroup %s was deleted and created again (uid %s, now %s)", o, o.UID, live.UID)
		}
	}
	return ""
}

// DeleteOrphan deletes an orphaned Auto Scaling group or launch template.
// A group is frozen first (aws.Freeze: it must not grow while its nodes
// drain, or the cluster-autoscaler would scale it out for the evicted
// pods), then its instances' Nodes are drained through the
// providers.InstanceDrains the ctx's Disruptions implements (none:
// nothing drained), then it is deleted (DeleteAutoScalingGroup,
// ForceDelete: its instances go with it). A launch template is deleted
// by id (DeleteLaunchTemplate). Both only while their tags, read again,
// name r.Owner.
func (p *Provisioner) DeleteOrphan(ctx context.Context, r providers.Owned) (providers.Deletion, error) {
	switch r.Kind {
	case KindScalingGroup:
		return p.deleteOrphanGroup(ctx, r)
	case launchtemplate.Kind:
		if _, err := p.aws.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: awssdk.String(r.ID)}); err != nil && !launchtemplate.IsNotFound(err) {
			return providers.Deletion{}, fmt.Errorf("ec2 DeleteLaunchTemplate %s: %w", r.Name, err)
		}
		return providers.Deletion{Deleting: true, Gone: true}, nil
	}
	return providers.Deletion{}, fmt.Errorf("eks provisioner: no orphan of kind %q", r.Kind)
}

func (p *Provisioner) deleteOrphanGroup(ctx context.Context, r providers.Owned) (providers.Deletion, error) {
	ours := func(g astypes.AutoScalingGroup) bool {
		return r.Owner.Check("Auto Scaling group", r.Name, ownership.TagMap(g.Tags, func(t astypes.TagDescription) *string { return t.Key }, func(t astypes.TagDescription) *string { return t.Value })) == nil
	}
	if _, err := awsp.Freeze(ctx, p.aws.AutoScaling, r.Name, ours); err != nil {
		return providers.Deletion{}, err
	}
	out, err := p.aws.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{r.Name}})
	if err != nil {
		return providers.Deletion{}, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", r.Name, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return providers.Deletion{Gone: true}, nil
	}
	g := out.AutoScalingGroups[0]
	if !ours(g) {
		return providers.Deletion{}, fmt.Errorf("Auto Scaling group %s is no longer tagged for InstanceGroup %s: left alone", r.Name, r.Owner)
	}
	var ids []string
	for _, in := range g.Instances {
		ids = append(ids, awssdk.ToString(in.InstanceId))
	}
	if d, ok := providers.DisruptionsFrom(ctx).(providers.InstanceDrains); ok && len(ids) > 0 {
		res, err := d.DrainInstances(ctx, ids)
		if err != nil {
			return providers.Deletion{}, err
		}
		if !res.Done {
			return providers.Deletion{Waiting: joinNonEmpty(res.Message, res.Blocked)}, nil
		}
	}
	if _, err := p.aws.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{
		AutoScalingGroupName: awssdk.String(r.Name), ForceDelete: awssdk.Bool(true)}); err != nil {
		return providers.Deletion{}, fmt.Errorf("autoscaling DeleteAutoScalingGroup %s: %w", r.Name, err)
	}
	return providers.Deletion{Deleting: true}, nil
}

// FinishOrphan deletes the node role and instance profile created for o
// (CandidateRoleNames), when their tags name o (iamrole.DeleteOwnedRole checks),
// after forgetting the aws-auth entry recorded for the role (ForgetRole)
// and deleting the EKS access entry instance-manager created for it
// (ForgetAccessEntry). A role that fails is reported and the next is
// tried.
func (p *Provisioner) FinishOrphan(ctx context.Context, o ownership.Owner) ([]string, error) {
	var deleted []string
	var errs []error
	for _, name := range CandidateRoleNames(o.Cluster, o.Namespace, o.Name) {
		got, err := p.aws.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
		if err != nil || got.Role == nil || o.Check("IAM role", name, iamrole.TagMap(got.Role.Tags)) != nil {
			continue
		}
		arn := awssdk.ToString(got.Role.Arn)
		if err := ForgetRole(ctx, p.access.kube, arn); err != nil {
			errs = append(errs, fmt.Errorf("removing the aws-auth entry of role %s: %w", name, err))
			continue
		}
		if p.aws.EKS != nil {
			if err := ForgetAccessEntry(ctx, p.aws.EKS, o.Cluster, arn); err != nil {
				errs = append(errs, fmt.Errorf("deleting the EKS access entry of role %s: %w", name, err))
				continue
			}
		}
		if err := iamrole.DeleteOwnedRole(ctx, p.aws.IAM, iamrole.OwnedRole{Name: name, Owner: o, InstanceProfile: true, Legacy: true}); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, KindRole+" "+name)
	}
	return deleted, errors.Join(errs...)
}

func joinNonEmpty(parts ...string) string {
	out := ""
	for _, s := range parts {
		if s == "" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += s
	}
	return out
}
