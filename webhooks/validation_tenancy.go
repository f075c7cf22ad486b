package webhooks

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/nodeargs"
)

// kubeletLabels are the kubernetes.io and k8s.io node labels a kubelet may
// set on its own Node under the NodeRestriction admission plugin; every
// other label of those domains (node-role.kubernetes.io/...,
// node-restriction.kubernetes.io/...) is refused in a group's labels.
var kubeletLabels = []string{
	"beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os",
	"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
	"kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os", "node.kubernetes.io/instance-type",
	"topology.kubernetes.io/region", "topology.kubernetes.io/zone",
}

// kubeletLabelDomains are the domains whose every label a kubelet may set.
var kubeletLabelDomains = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}

func inDomain(domain, base string) bool {
	return domain == base || strings.HasSuffix(domain, "."+base)
}

// reservedLabel returns why a node label key is reserved, or "".
func reservedLabel(key string) string {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	domain = strings.ToLower(domain)
	switch {
	case inDomain(domain, "instancemgr.keikoproj.io"):
		return "the instancemgr.keikoproj.io/ prefix is reserved for the labels instance-manager sets"
	case inDomain(domain, "kubernetes.io") || inDomain(domain, "k8s.io"):
		if slices.Contains(kubeletLabels, key) || slices.Contains(kubeletLabelDomains, domain) {
			return ""
		}
		return "the kubernetes.io/ and k8s.io/ prefixes are reserved (NodeRestriction lets kubelets set only " +
			strings.Join(kubeletLabels, ", ") + " and the " + strings.Join(kubeletLabelDomains, ", ") + " domains)"
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

// reservedTag returns why a tag key is reserved, or "": the ownership tags
// of instance-manager and the cluster tags of Kubernetes and the
// cluster-autoscaler decide what belongs to which group and cluster.
func reservedTag(key string) string {
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
