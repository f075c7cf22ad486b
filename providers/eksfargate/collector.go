package eksfargate

import (
	"context"
	"errors"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// KindProfile is the GC's resource label of Fargate profiles.
const KindProfile = "fargate-profile"

var _ providers.Collector = (*Provisioner)(nil)

// Owned lists the Fargate profiles of each cluster (EKS
// ListFargateProfiles, then DescribeFargateProfile of each for its tags)
// whose ownership tags prove them this installation's, for that cluster
// (ownership.Recorded). A cluster that does not exist has none. Profiles
// being deleted are listed (Deleting).
func (p *Provisioner) Owned(ctx context.Context, clusters []string) ([]providers.Owned, error) {
	return providers.OwnedByCluster(ctx, clusters, KindProfile,
		func(ctx context.Context, cluster string) ([]string, bool, error) {
			names, err := listNames(ctx, p.aws.EKS, cluster)
			if errors.Is(err, errNoCluster) {
				return nil, false, nil
			}
			return names, err == nil, err
		},
		func(ctx context.Context, cluster, name string) (*ekstypes.FargateProfile, error) {
			return describe(ctx, p.aws.EKS, cluster, name)
		},
		func(fp *ekstypes.FargateProfile) providers.Owned {
			return providers.Owned{Tags: fp.Tags, Created: awssdk.ToTime(fp.CreatedAt), Deleting: fp.Status == ekstypes.FargateProfileStatusDeleting}
		})
}

// Builds: see providers.Claim (eks-fargate adopts nothing).
func (p *Provisioner) Builds(live *v1alpha1.InstanceGroup, r providers.Owned) string {
	cluster := ""
	if f := live.Spec.EKSFargate; f != nil {
		cluster = f.ClusterName
	}
	return providers.Claim(live, r, v1alpha1.ProvisionerEKSFargate, cluster)
}

// DeleteOrphan evicts the pods the profile runs (label LabelProfile)
// through the Disruptions ctx carries, as a replacement does (evictFirst),
// then deletes the profile (EKS DeleteFargateProfile), once its tags,
// described again, still name r.Owner.
func (p *Provisioner) DeleteOrphan(ctx context.Context, r providers.Owned) (providers.Deletion, error) {
	fp, err := describe(ctx, p.aws.EKS, r.Owner.Cluster, r.Name)
	if err != nil || fp == nil {
		return providers.Deletion{Gone: fp == nil && err == nil}, err
	}
	if err := r.Owner.Check("Fargate profile", r.Name, fp.Tags); err != nil {
		return providers.Deletion{}, err
	}
	if fp.Status == ekstypes.FargateProfileStatusDeleting {
		return providers.Deletion{Deleting: true}, nil
	}
	waiting, blocked, err := evictFirst(ctx, []ekstypes.FargateProfile{*fp})
	if err != nil {
		return providers.Deletion{}, err
	}
	if len(waiting) > 0 {
		if blocked != "" {
			waiting = append(waiting, blocked)
		}
		return providers.Deletion{Waiting: strings.Join(waiting, "; ")}, nil
	}
	if _, err := deleteProfiles(ctx, p.aws.EKS, r.Owner.Cluster, []ekstypes.FargateProfile{*fp}); err != nil {
		return providers.Deletion{}, err
	}
	after, err := describe(ctx, p.aws.EKS, r.Owner.Cluster, r.Name)
	return providers.Deletion{Deleting: true, Gone: after == nil && err == nil}, nil
}

// FinishOrphan deletes, once o has no profile left, the pod execution
// role (of either naming scheme) created for o, only when its tags name
// o (iamrole.DeleteOwnedRoleReport).
func (p *Provisioner) FinishOrphan(ctx context.Context, o ownership.Owner) ([]string, error) {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate, EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: o.Cluster}},
	}
	var deleted []string
	for _, name := range []string{ownership.Name(ownership.LimitIAMRole, o.Cluster, o.Namespace, o.Name), ownership.EKSName(ownership.LimitIAMRole, o.Cluster, o.Namespace, o.Name)} {
		role := podRole(ig)
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
