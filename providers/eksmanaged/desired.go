package eksmanaged

import (
	"fmt"
	"maps"
	"sort"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/tagrecord"
)

// nodegroup is the desired state of a managed node group, computed from
// the effective spec with references already resolved. Empty optional
// fields (instanceTypes, amiType, diskSize, keyPair, version,
// releaseVersion) leave the choice to EKS.
type nodegroup struct {
	cluster, name string
	roleARN       string
	subnets       []string // ids, sorted
	instanceTypes []string
	amiType       string
	diskSize      int32 // GiB
	capacityType  string
	keyPair       string
	sourceSGs     []string // ids, sorted; only with keyPair
	min, max      int32
	labels        map[string]string
	taints        []ekstypes.Taint
	version       string
	release       string
	force         bool // version updates with EKS's force flag (forceVersionUpdate)
	tags          map[string]string
	// template is the controller's launch template version the node
	// group uses (see launchtemplate.go); nil with SSH remote access,
	// which EKS allows only with its own template.
	template *templateRef
}

// refs are the spec's references resolved against AWS.
type refs struct {
	subnets, sourceSGs []string
	roleARN            string
}

// desiredNodegroup maps the effective spec onto a node group: labels are
// nodeLabels overlaid with labels plus the instancemgr group labels;
// taints take the EKS effect names; tags are the spec's {key, value}
// list plus the ownership tags and the record of the tags the controller
// manages (tagrecord.With); capacity type defaults to ON_DEMAND. An
// unknown taint effect is a *providers.SpecError.
func desiredNodegroup(ig *v1alpha1.InstanceGroup, r refs) (nodegroup, error) {
	m := ig.Spec.EKSManaged
	c := m.Configuration
	if err := providers.CheckInt32(map[string]int64{"spec.eks-managed.minSize": m.MinSize, "spec.eks-managed.maxSize": m.MaxSize,
		"spec.eks-managed.configuration.volSize": c.VolSize}); err != nil {
		return nodegroup{}, err
	}
	ng := nodegroup{
		cluster: c.ClusterName, name: nodegroupName(ig), roleARN: r.roleARN,
		subnets: sorted(r.subnets), amiType: c.AmiType, diskSize: int32(c.VolSize),
		capacityType: c.CapacityType, version: c.Version, release: c.ReleaseVersion, force: c.ForceVersionUpdate,
		min: int32(m.MinSize), max: int32(m.MaxSize),
	}
	switch {
	case len(c.InstanceTypes) > 0:
		ng.instanceTypes = append([]string(nil), c.InstanceTypes...)
	case c.InstanceType != "":
		ng.instanceTypes = []string{c.InstanceType}
	}
	if ng.capacityType == "" {
		ng.capacityType = string(ekstypes.CapacityTypesOnDemand)
	}
	if c.KeyPairName != "" {
		ng.keyPair = c.KeyPairName
		ng.sourceSGs = sorted(r.sourceSGs)
	}
	ng.labels = map[string]string{}
	for k, v := range c.NodeLabels {
		ng.labels[k] = v
	}
	for k, v := range c.Labels {
		ng.labels[k] = v
	}
	ng.labels[v1alpha1.LabelInstanceGroup] = ig.Name
	ng.labels[v1alpha1.LabelInstanceGroupNamespace] = ig.Namespace
	for i, t := range c.Taints {
		effect, ok := taintEffects[t.Effect]
		if !ok {
			return nodegroup{}, &providers.SpecError{Field: fmt.Sprintf("%s.taints[%d].effect", configPath, i),
				Detail: fmt.Sprintf("%q is not one of NoSchedule, NoExecute, PreferNoSchedule", t.Effect)}
		}
		et := ekstypes.Taint{Key: awssdk.String(t.Key), Effect: effect}
		if t.Value != "" {
			et.Value = awssdk.String(t.Value)
		}
		ng.taints = append(ng.taints, et)
	}
	ng.tags = map[string]string{}
	for _, t := range c.Tags {
		ng.tags[t["key"]] = t["value"]
	}
	maps.Copy(ng.tags, ownership.OwnerOf(ig, c.ClusterName).Tags()) // last: a spec tag cannot replace them
	ng.tags = tagrecord.With(ng.tags)                               // which tags are the controller's to remove
	return ng, nil
}

// taintEffects maps Kubernetes taint effects to EKS's names.
var taintEffects = map[corev1.TaintEffect]ekstypes.TaintEffect{
	corev1.TaintEffectNoSchedule:       ekstypes.TaintEffectNoSchedule,
	corev1.TaintEffectNoExecute:        ekstypes.TaintEffectNoExecute,
	corev1.TaintEffectPreferNoSchedule: ekstypes.TaintEffectPreferNoSchedule,
}

// createInput is the EKS CreateNodegroup request building ng, with
// desired size = min size.
func (ng nodegroup) createInput() *eks.CreateNodegroupInput {
	in := &eks.CreateNodegroupInput{
		ClusterName: awssdk.String(ng.cluster), NodegroupName: awssdk.String(ng.name),
		NodeRole: awssdk.String(ng.roleARN), Subnets: ng.subnets,
		ScalingConfig: &ekstypes.NodegroupScalingConfig{
			MinSize: awssdk.Int32(ng.min), MaxSize: awssdk.Int32(ng.max), DesiredSize: awssdk.Int32(ng.min)},
		InstanceTypes: ng.instanceTypes, CapacityType: ekstypes.CapacityTypes(ng.capacityType),
		Labels: ng.labels, Taints: ng.taints, Tags: ng.tags,
	}
	if ng.amiType != "" {
		in.AmiType = ekstypes.AMITypes(ng.amiType)
	}
	if t := ng.template; t != nil {
		// The disk is the template's: EKS refuses diskSize with one.
		in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: awssdk.String(t.id), Version: awssdk.String(t.version)}
	} else if ng.diskSize > 0 {
		in.DiskSize = awssdk.Int32(ng.diskSize)
	}
	if ng.keyPair != "" {
		in.RemoteAccess = &ekstypes.RemoteAccessConfig{Ec2SshKey: awssdk.String(ng.keyPair), SourceSecurityGroups: ng.sourceSGs}
	}
	if ng.version != "" {
		in.Version = awssdk.String(ng.version)
	}
	if ng.release != "" {
		in.ReleaseVersion = awssdk.String(ng.release)
	}
	return in
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}
