package boundaries

import (
	"fmt"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Default quotas, in force when the boundary ConfigMap has no quotas key
// (or there is no ConfigMap): a tenant namespace may hold 10 groups of at
// most 50 instances each, 512 vCPUs at maxSize in all (e.g. 64 x
// m5.2xlarge), volumes of at most 1 TiB and warm pools of at most 50; the
// cluster at most 200 groups (40% of the default regional quota of 500
// Auto Scaling groups, which every cluster and team of the account and
// region share) and 4,096 vCPUs. An admin who wants other bounds writes
// the quotas key; `quotas: "{}"` turns every bound but AWSLimits off.
const (
	DefaultMaxGroupsPerNamespace    = 10
	DefaultMaxSize                  = 50
	DefaultMaxTotalVCPUPerNamespace = 512
	DefaultMaxVolumeSize            = 1024
	DefaultMaxWarmPoolSize          = 50
	DefaultMaxGroupsTotal           = 200
	DefaultMaxTotalVCPUTotal        = 4096
)

// Default AWS service quotas (Amazon EKS and Amazon EC2 Auto Scaling
// "Service quotas" pages): managed node groups per cluster 30, Fargate
// profiles per cluster 10, Auto Scaling groups per region 500. The first
// two are fixed by EKS; the third can be raised, so quotas.awsLimits
// takes the account's value.
const (
	DefaultManagedNodeGroupsPerCluster = 30
	DefaultFargateProfilesPerCluster   = 10
	DefaultAutoScalingGroupsPerRegion  = 500
)

// AWSLimits are AWS's own quotas, checked at admission so that the group
// is refused with a clear message before AWS refuses it half-built. They
// apply to every namespace, the admin's and excluded ones included: AWS
// counts every group. Only groups of this installation are counted; node
// groups, profiles and Auto Scaling groups made otherwise take room too.
type AWSLimits struct {
	// ManagedNodeGroupsPerCluster bounds eks-managed groups per EKS cluster.
	ManagedNodeGroupsPerCluster *int64 `json:"managedNodeGroupsPerCluster,omitempty"`
	// FargateProfilesPerCluster bounds eks-fargate groups per EKS cluster.
	FargateProfilesPerCluster *int64 `json:"fargateProfilesPerCluster,omitempty"`
	// AutoScalingGroupsPerRegion bounds the groups that are Auto Scaling
	// groups: eks ones, and eks-managed ones (EKS builds each node group
	// on one).
	AutoScalingGroupsPerRegion *int64 `json:"autoScalingGroupsPerRegion,omitempty"`
}

func ptrTo(v int64) *int64 { return &v }

// DefaultQuotas returns the quotas in force when the ConfigMap sets none.
func DefaultQuotas() *Quotas {
	return &Quotas{
		PerNamespace: &Quota{
			MaxGroups: ptrTo(DefaultMaxGroupsPerNamespace), MaxSize: ptrTo(DefaultMaxSize),
			MaxTotalVCPU: ptrTo(DefaultMaxTotalVCPUPerNamespace), MaxVolumeSize: ptrTo(DefaultMaxVolumeSize),
			MaxWarmPoolSize: ptrTo(DefaultMaxWarmPoolSize),
		},
		Total: &Quota{MaxGroups: ptrTo(DefaultMaxGroupsTotal), MaxTotalVCPU: ptrTo(DefaultMaxTotalVCPUTotal)},
	}
}

// EffectiveQuotas returns the quotas in force under c: its quotas key, or
// DefaultQuotas when it has none (a nil Config included).
func (c *Config) EffectiveQuotas() *Quotas {
	if c == nil || c.Quotas == nil {
		return DefaultQuotas()
	}
	return c.Quotas
}

// CheckAWSLimits returns the AWS quotas ig would break, given the other
// InstanceGroups of the installation (ig itself, by namespace and name,
// is skipped; groups being deleted still hold their resource), each naming
// the limit and where it is set, e.g. "30 eks-managed groups of cluster
// prod would be above quotas.awsLimits.managedNodeGroupsPerCluster (30,
// AWS's limit of managed node groups per cluster)".
func (q *Quotas) CheckAWSLimits(ig *v1alpha1.InstanceGroup, others []v1alpha1.InstanceGroup) []string {
	var l AWSLimits
	if q != nil && q.AWSLimits != nil {
		l = *q.AWSLimits
	}
	mng := orDefault(l.ManagedNodeGroupsPerCluster, DefaultManagedNodeGroupsPerCluster)
	fargate := orDefault(l.FargateProfilesPerCluster, DefaultFargateProfilesPerCluster)
	asgs := orDefault(l.AutoScalingGroupsPerRegion, DefaultAutoScalingGroupsPerRegion)

	kind, cluster := awsKind(ig)
	// Counts with ig: groups on Auto Scaling groups (eks, eks-managed),
	// and groups of ig's kind in ig's cluster.
	onASGs, sameCluster := int64(1), int64(1)
	for i := range others {
		o := &others[i]
		if o.Namespace == ig.Namespace && o.Name == ig.Name {
			continue
		}
		k, c := awsKind(o)
		if k == asgKind || k == managedKind {
			onASGs++
		}
		if k == kind && c == cluster {
			sameCluster++
		}
	}
	var out []string
	if kind == managedKind && sameCluster > mng {
		out = append(out, fmt.Sprintf("%d eks-managed groups of cluster %q would be above quotas.awsLimits.managedNodeGroupsPerCluster (%d, EKS's limit of managed node groups per cluster)", sameCluster, cluster, mng))
	}
	if kind == fargateKind && sameCluster > fargate {
		out = append(out, fmt.Sprintf("%d eks-fargate groups of cluster %q would be above quotas.awsLimits.fargateProfilesPerCluster (%d, EKS's limit of Fargate profiles per cluster)", sameCluster, cluster, fargate))
	}
	if (kind == asgKind || kind == managedKind) && onASGs > asgs {
		out = append(out, fmt.Sprintf("%d groups built on Auto Scaling groups (eks and eks-managed) would be above quotas.awsLimits.autoScalingGroupsPerRegion (%d, the account's Auto Scaling groups per region)", onASGs, asgs))
	}
	return out
}

func orDefault(v *int64, def int64) int64 {
	if v == nil {
		return def
	}
	return *v
}

type awsResourceKind int

const (
	otherKind awsResourceKind = iota
	asgKind
	managedKind
	fargateKind
)

// awsKind says which AWS resource ig is built on, and its cluster.
func awsKind(ig *v1alpha1.InstanceGroup) (awsResourceKind, string) {
	switch ig.Spec.Provisioner {
	case v1alpha1.ProvisionerEKSManaged:
		if m := ig.Spec.EKSManaged; m != nil && m.Configuration != nil {
			return managedKind, m.Configuration.ClusterName
		}
		return managedKind, ""
	case v1alpha1.ProvisionerEKSFargate:
		if f := ig.Spec.EKSFargate; f != nil {
			return fargateKind, f.ClusterName
		}
		return fargateKind, ""
	case v1alpha1.ProvisionerEKS, v1alpha1.ProvisionerEKSCF, "":
		return asgKind, ""
	}
	return otherKind, ""
}

// eksManagedDefaultType is the instance type EKS launches for a managed
// node group that names none (EKS CreateNodegroup, instanceTypes: t3.medium,
// or t4g.medium for Arm AMI types).
func eksManagedDefaultType(amiType string) string {
	if strings.Contains(strings.ToUpper(amiType), "ARM") {
		return "t4g.medium"
	}
	return "t3.medium"
}

// subFamilyProbe is an instance type of base's sub-family that no real
// type is: the quotas' instanceTypes allow instancePool SubFamilyFlexible
// only when a pattern matches it as well as base, that is when they allow
// the whole sub-family at base's size (e.g. "m5*.large", "m5*", "*.large")
// and not just the types listed (m5.large, m5a.large): EC2 adds members to
// a sub-family (m5zn after m5n) that the admin never saw.
func subFamilyProbe(base string) (string, bool) {
	family, generation, ok := v1alpha1.SubFamilyOf(base)
	if !ok {
		return "", false
	}
	_, size, _ := strings.Cut(base, ".")
	return family + generation + "zzzz." + size, true
}
