package webhooks

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/nodeargs"
)

// Node labels a group may not set (issue 25, N8). The NodeRestriction
// admission plugin lets a kubelet set, of the kubernetes.io and k8s.io
// domains, only its well-known labels and the kubelet.kubernetes.io and
// node.kubernetes.io domains. Of those, the well-known ones describe the
// node itself (the kubelet derives them from the host and the cloud):
// set by a group, one node passes for another (its hostname attracts pods
// bound to another node's local volumes, a zone strands zone-pinned
// volumes). Every other kubernetes.io/k8s.io label is the cluster's
// (node-role.kubernetes.io, node-restriction.kubernetes.io). Labels of
// other node-pool owners (EKS managed node groups, Karpenter) would
// attract pods placed on the platform's pools.
var (
	// derivedLabels are labels the kubelet (or the cloud) derives from
	// the instance; derivedLabelDomains are domains of such labels.
	derivedLabels       = []string{"kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os", "node.kubernetes.io/instance-type"}
	derivedLabelDomains = []string{"beta.kubernetes.io", "failure-domain.beta.kubernetes.io", "topology.kubernetes.io", "topology.k8s.aws"}
	// kubeletLabelDomains are the kubernetes.io domains a group may use
	// (NodeRestriction's kubelet domains), derived labels aside.
	kubeletLabelDomains = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
	// poolOwnerDomains are the domains of other node-pool owners.
	poolOwnerDomains = []string{"eks.amazonaws.com", "karpenter.sh", "karpenter.k8s.aws"}
	// networkLabelDomains are the AWS VPC CNI's: with custom networking it
	// gives a node's pods the subnet and security groups of the ENIConfig
	// its label names (ENI_CONFIG_LABEL_DEF, k8s.amazonaws.com/eniConfig),
	// and vpc.amazonaws.com labels say which network resources a node has
	// (security groups for pods, trunk interfaces): set by a group, its
	// pods would get another team's pod network (review N31).
	networkLabelDomains = []string{"k8s.amazonaws.com", "vpc.amazonaws.com"}
)

func inDomain(domain, base string) bool {
	return domain == base || strings.HasSuffix(domain, "."+base)
}

// reservedLabel returns why a node label key is reserved, or "".
func reservedLabel(key string) string {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	domain, lower := strings.ToLower(domain), strings.ToLower(key)
	switch {
	case inDomain(domain, "instancemgr.keikoproj.io"):
		return "the instancemgr.keikoproj.io/ prefix is reserved for the labels instance-manager sets"
	case slices.Contains(derivedLabels, lower) || slices.ContainsFunc(derivedLabelDomains, func(d string) bool { return inDomain(domain, d) }):
		return "the kubelet derives this label from the instance (" + strings.Join(derivedLabels, ", ") + " and the " +
			strings.Join(derivedLabelDomains, ", ") + " domains are refused): a node would pass for another node, zone or type"
	case slices.ContainsFunc(poolOwnerDomains, func(d string) bool { return inDomain(domain, d) }):
		return "the " + strings.Join(poolOwnerDomains, ", ") + " domains belong to other node-pool owners (EKS managed node groups, Karpenter): their pods would be placed on this group's nodes"
	case slices.ContainsFunc(networkLabelDomains, func(d string) bool { return inDomain(domain, d) }):
		return "the " + strings.Join(networkLabelDomains, ", ") + " domains are the VPC CNI's (the ENIConfig label picks the pods' subnet and security groups): a group's pods would get another network"
	case inDomain(domain, "kubernetes.io") || inDomain(domain, "k8s.io"):
		if slices.Contains(kubeletLabelDomains, domain) {
			return ""
		}
		return "the kubernetes.io/ and k8s.io/ prefixes are reserved (a group may use only the " + strings.Join(kubeletLabelDomains, ", ") +
			" domains, which the NodeRestriction admission plugin lets kubelets set, and not the labels the kubelet derives)"
	}
	return ""
}

func validateNodeLabels(labels map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if why := reservedLabel(k); why != "" {
			errs = append(errs, field.Forbidden(path.Key(k), why))
		}
	}
	return errs
}

// reservedTag returns why a tag key is refused, or "": the ownership tags
// of instance-manager and the cluster tags of Kubernetes and the
// cluster-autoscaler decide what belongs to which group and cluster; a
// comma would forge entries in the comma-separated record of the tag keys
// the controller manages on an Auto Scaling group (and so have it delete
// tags others added; AWS's tag character set has no comma either).
func reservedTag(key string) string {
	if strings.Contains(key, ",") {
		return "tag keys may not contain a comma: instance-manager records the tag keys it manages as a comma-separated list"
	}
	k := strings.ToLower(key)
	for _, p := range []string{"instancemgr.keikoproj.io/", "kubernetes.io/cluster/", "k8s.io/cluster-autoscaler/"} {
		if strings.HasPrefix(k, p) {
			return "tag keys starting with " + p + " are set by instance-manager (ownership and cluster tags)"
		}
	}
	return ""
}

func validateTagKeys(keys []string, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range keys {
		if why := reservedTag(k); why != "" {
			errs = append(errs, field.Forbidden(path(k), why))
		}
	}
	return errs
}

// validateNodeStrings checks what the eks user data interpolates:
// bootstrapArguments, and each volume's device name, mount path and file
// system type (nodeargs patterns).
func validateNodeStrings(c *v1alpha1.EKSConfiguration, cp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.BootstrapArguments != "" {
		if _, err := nodeargs.Parse(c.BootstrapArguments); err != nil {
			errs = append(errs, field.Invalid(cp.Child("bootstrapArguments"), c.BootstrapArguments, err.Error()))
		}
	}
	for i, v := range c.Volumes {
		vp := cp.Child("volumes").Index(i)
		if v.Name != "" && !nodeargs.DeviceName.MatchString(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "must be a device name like /dev/xvdb (^/dev/[a-z0-9]+$)"))
		}
		if m := v.MountOptions; m != nil {
			if m.Mount != "" && !nodeargs.MountPath.MatchString(m.Mount) {
				errs = append(errs, field.Invalid(vp.Child("mountOptions", "mount"), m.Mount, "must be an absolute path of letters, digits and ._/- (^/[A-Za-z0-9._/-]*$)"))
			}
			if m.FileSystem != "" && !nodeargs.FileSystem.MatchString(m.FileSystem) {
				errs = append(errs, field.Invalid(vp.Child("mountOptions", "fileSystem"), m.FileSystem, "must be a file system type like xfs or ext4"))
			}
		}
	}
	return errs
}

func listTagKeys(tags []map[string]string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		out = append(out, t["key"])
	}
	return out
}
