package imagepins

import (
	"maps"
	"slices"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

// variant is an OS family and architecture a "latest" group runs.
type variant struct{ os, arch string }

// need is what the groups' image references need resolved: for each
// cluster that "latest" groups join, the OS family/architecture variants
// they run; and the SSM parameters "ssm://" groups name.
type need struct {
	latest map[string]map[variant]bool
	params map[string]bool
}

// needs reads the eks groups' image references from their effective
// specs. Groups of namespaces the boundaries exclude are left out: the
// effective spec does not pin their image.
func needs(groups []v1alpha1.InstanceGroup, cfg *boundaries.Config) need {
	n := need{latest: map[string]map[variant]bool{}, params: map[string]bool{}}
	for i := range groups {
		ig := &groups[i]
		if ig.Spec.EKS == nil || ig.Spec.EKS.Configuration == nil || ig.DeletionTimestamp != nil || cfg.Excluded(ig.Namespace) {
			continue
		}
		c := ig.Spec.EKS.Configuration
		param, ok := v1alpha1.ImageParameter(c.Image, "", ig.Annotations)
		switch {
		case !ok:
		case c.Image == v1alpha1.ImageLatest:
			if n.latest[c.ClusterName] == nil {
				n.latest[c.ClusterName] = map[variant]bool{}
			}
			n.latest[c.ClusterName][variant{v1alpha1.OSFamilyOf(ig.Annotations), ig.Annotations[v1alpha1.AnnotationArchitecture]}] = true
		default:
			n.params[param] = true
		}
	}
	return n
}

// clusters are the clusters whose version "latest" needs, sorted.
func (n need) clusters() []string { return slices.Sorted(maps.Keys(n.latest)) }

// parameters are the SSM parameters the need names with the clusters'
// versions (a cluster without a version contributes none), sorted.
func (n need) parameters(versions map[string]string) []string {
	set := maps.Clone(n.params)
	for cluster, variants := range n.latest {
		v := versions[cluster]
		if v == "" {
			continue
		}
		for vr := range variants {
			set[v1alpha1.LatestImageParameter(v, vr.os, vr.arch)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// missing reports whether pins lack a cluster version or a parameter the
// need names: a group started using a reference nothing pins yet.
func (n need) missing(pins *boundaries.Pins) bool {
	var versions map[string]string
	var images map[string]string
	if pins != nil {
		versions, images = pins.ClusterVersions, pins.Images
	}
	for _, c := range n.clusters() {
		if versions[c] == "" {
			return true
		}
	}
	for _, p := range n.parameters(versions) {
		if _, ok := images[p]; !ok {
			return true
		}
	}
	return false
}

// empty reports whether no group needs anything resolved.
func (n need) empty() bool { return len(n.latest) == 0 && len(n.params) == 0 }
