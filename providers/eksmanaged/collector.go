package eksmanaged

import (
	"context"
	"errors"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// KindNodegroup is the GC's resource label of managed node groups.
const KindNodegroup = "nodegroup"

var _ providers.Collector = (*Provisioner)(nil)

// Owned lists the managed node groups of each cluster (EKS ListNodegroups,
// then DescribeNodegroup of each for its tags) whose ownership tags prove
// them this installation's, for that cluster (ownership.Recorded), and
// the launch templates of the region (EC2 DescribeLaunchTemplates
// filtered by the installation tag) named as a managed group's
// (templateName). A cluster that does not exist has none. Node groups
// being deleted are listed (Deleting), so their owner's launch template
// (Dependent) waits for them.
func (p *Provisioner) Owned(ctx context.Context, clusters []string) ([]providers.Owned, error) {
	out, err := p.ownedTemplates(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := providers.OwnedByCluster(ctx, clusters, KindNodegroup,
		func(ctx context.Context, cluster string) ([]string, bool, error) {
			names, err := listNames(ctx, p.aws.EKS, cluster)
			if errors.Is(err, errNoCluster) {
				return nil, false, nil
			}
			return names, err == nil, err
		},
		func(ctx context.Context, cluster, name string) (*ekstypes.Nodegroup, error) {
			return describe(ctx, p.aws.EKS, cluster, name)
		},
		func(ng *ekstypes.Nodegroup) providers.Owned {
			return providers.Owned{Tags: ng.Tags, Created: awssdk.ToTime(ng.CreatedAt), Deleting: ng.Status == ekstypes.NodegroupStatusDeleting}
		})
	if err != nil {
		return nil, err
	}
	return append(out, groups...), nil
}

// Builds: see providers.Claim (eks-managed adopts nothing).
func (p *Provisioner) Builds(live *v1alpha1.InstanceGroup, r providers.Owned) string {
	cluster := ""
	if m := live.Spec.EKSManaged; m != nil && m.Configuration != nil {
		cluster = m.Configuration.ClusterName
	}
	return providers.Claim(live, r, v1alpha1.ProvisionerEKSManaged, cluster)
}

// ownedTemplates lists the launch templates tagged for this installation
// (one paginated EC2 DescribeLaunchTemplates) whose name is the one a
// managed group of the owner their tags prove would use.
func (p *Provisioner) ownedTemplates(ctx context.Context) ([]providers.Owned, error) {
	id := ownership.Installation()
	if id == "" {
		return nil, nil
	}
	var out []providers.Owned
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.aws.EC2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: awssdk.String("tag:" + ownership.TagInstallation), Values: []string{id}}}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeLaunchTemplates (installation %s): %w", id, err)
		}
		for _, lt := range page.LaunchTemplates {
			tags := ownership.EC2TagMap(lt.Tags)
			name := awssdk.ToString(lt.LaunchTemplateName)
			if o, ok := ownership.Recorded(tags); ok && name == templateName(orphanGroup(o)) {
				out = append(out, providers.Owned{Kind: launchtemplate.Kind, Name: name, ID: awssdk.ToString(lt.LaunchTemplateId), Owner: o,
					Tags: tags, Created: awssdk.ToTime(lt.CreateTime), Dependent: true})
			}
		}
	}
	return out, nil
}

// DeleteOrphan drains the node group's Nodes (label LabelNodegroup)
// through the Disruptions ctx carries, as a retirement does
// (drainBeforeDelete), then deletes it (EKS DeleteNodegroup), once its
// tags, described again, still name r.Owner.
func (p *Provisioner) DeleteOrphan(ctx context.Context, r providers.Owned) (providers.Deletion, error) {
	if r.Kind == launchtemplate.Kind {
		if err := p.deleteTemplate(ctx, orphanGroup(r.Owner), r.Owner.Cluster); err != nil {
			return providers.Deletion{}, err
		}
		return providers.Deletion{Deleting: true, Gone: true}, nil
	}
	ng, err := describe(ctx, p.aws.EKS, r.Owner.Cluster, r.Name)
	if err != nil || ng == nil {
		return providers.Deletion{Gone: ng == nil && err == nil}, err
	}
	if err := r.Owner.Check("EKS node group", r.Name, ng.Tags); err != nil {
		return providers.Deletion{}, err
	}
	if ng.Status == ekstypes.NodegroupStatusDeleting {
		return providers.Deletion{Deleting: true}, nil
	}
	waits, blocks, err := drainBeforeDelete(ctx, []*ekstypes.Nodegroup{ng})
	if err != nil {
		return providers.Deletion{}, err
	}
	if len(waits) > 0 {
		return providers.Deletion{Waiting: strings.Join(append(waits, blocks...), "; ")}, nil
	}
	if _, err := deleteNodegroups(ctx, p.aws.EKS, r.Owner.Cluster, []*ekstypes.Nodegroup{ng}); err != nil {
		return providers.Deletion{}, err
	}
	after, err := describe(ctx, p.aws.EKS, r.Owner.Cluster, r.Name)
	return providers.Deletion{Deleting: true, Gone: after == nil && err == nil}, nil
}

// FinishOrphan deletes, once o has no node group or launch template
// left, the node role (of either naming scheme) created for o, only when
// its tags name o (iamrole.DeleteOwnedRoleReport).
func (p *Provisioner) FinishOrphan(ctx context.Context, o ownership.Owner) ([]string, error) {
	ig := orphanGroup(o)
	var deleted []string
	for _, name := range []string{ownership.Name(ownership.LimitIAMRole, o.Cluster, o.Namespace, o.Name), ownership.EKSName(ownership.LimitIAMRole, o.Cluster, o.Namespace, o.Name)} {
		role := nodeRole(ig, false)
		role.Name = name
		gone, err := iamrole.DeleteOwnedRoleReport(ctx, p.aws.IAM, role)
		if err != nil {
			return deleted, err
		}
		if gone {
			deleted = append(deleted, "iam-role "+name)
		}
	}
	return deleted, nil
}

// orphanGroup is the InstanceGroup o's tags record, as far as names and
// ownership checks need it.
func orphanGroup(o ownership.Owner) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged,
			EKSManaged: &v1alpha1.EKSManagedSpec{Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: o.Cluster}}},
	}
}
