package eks

import (
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/tagrecord"
)

// Limits of AWS that a spec can break. The admission webhook checks them
// with UserDataSize and ScalingGroupTags, so a spec past them is refused
// with the field to change instead of failing in AWS later.
const (
	// MaxUserDataBytes is EC2's limit on an instance's user data, in raw
	// form before base64 encoding (16 KB).
	MaxUserDataBytes = 16 << 10
	// MaxScalingGroupTags is Auto Scaling's limit on the tags of a group.
	MaxScalingGroupTags = 50
)

// sizingCluster is a cluster as EKS describes one, with an endpoint and a
// certificate authority of typical size (a real EKS CA is about 1,500
// base64 characters), for sizing user data before the cluster is read.
var sizingCluster = ClusterInfo{
	Endpoint:             "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
	CertificateAuthority: strings.Repeat("A", 1500),
	ServiceCIDR:          "172.20.0.0/16", Version: "1.31", AuthenticationMode: "API_AND_CONFIG_MAP",
}

// groupBootstrap is the input of the user data of ig's instances in
// cluster: the spec's labels, then the group's own (so a tenant label
// cannot claim another group), taints, bootstrap arguments and options,
// user data stages and volumes.
func groupBootstrap(ig *v1alpha1.InstanceGroup, cluster ClusterInfo) bootstrap {
	c := ig.Spec.EKS.Configuration
	labels := map[string]string{}
	for k, v := range c.Labels {
		labels[k] = v
	}
	labels[v1alpha1.LabelInstanceGroup], labels[v1alpha1.LabelInstanceGroupNamespace] = ig.Name, ig.Namespace
	var maxPods int64
	if c.BootstrapOptions != nil {
		maxPods = c.BootstrapOptions.MaxPods
	}
	return bootstrap{cluster: cluster, osFamily: osFamily(ig), labels: labels, taints: c.Taints, maxPods: maxPods,
		extraArgs: c.BootstrapArguments, stages: c.UserData, volumes: c.Volumes, waitInService: ig.Spec.EKS.WarmPool != nil}
}

// UserDataSize is the size in bytes of the user data Apply gives ig's
// instances (before base64), for a cluster of typical endpoint and
// certificate size. ig must have spec.eks.configuration.
func UserDataSize(ig *v1alpha1.InstanceGroup) int {
	cluster := sizingCluster
	cluster.Name = ig.Spec.EKS.Configuration.ClusterName
	return len(groupBootstrap(ig, cluster).UserData())
}

// ScalingGroupTags counts the tags Apply puts on ig's Auto Scaling group:
// the spec's, Name, the cluster's and the ownership tags (the UID and
// installation counted even before they are known), the
// cluster-autoscaler's when enabled, the record of the tags it manages,
// and the hashes of a mixed instances policy and of lifecycle hooks. It
// returns the total and how many of them instance-manager adds to the
// spec's. ig must have spec.eks.configuration.
func ScalingGroupTags(ig *v1alpha1.InstanceGroup) (total, added int) {
	owned := ig.DeepCopy()
	if owned.UID == "" {
		owned.UID = "00000000-0000-0000-0000-000000000000"
	}
	tags := tagrecord.With(groupTags(owned, GroupName(owned)))
	total = len(tags)
	if _, ok := tags[ownership.TagInstallation]; !ok {
		total++
	}
	c := ig.Spec.EKS.Configuration
	if c.MixedInstancesPolicy != nil {
		total++
	}
	if len(c.LifecycleHooks) > 0 {
		total++
	}
	spec := map[string]bool{}
	for _, t := range c.Tags {
		if t["key"] != "" {
			spec[t["key"]] = true
		}
	}
	return total, total - len(spec)
}
