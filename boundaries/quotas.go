package boundaries

import (
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Quotas is the data key quotas of the boundary ConfigMap:
//
//	quotas: |
//	  perNamespace: {maxGroups: 5, maxSize: 10, maxTotalVCPU: 64}  # every namespace
//	  namespaces:                                                 # replaces perNamespace
//	    team-a: {maxGroups: 10, instanceTypes: ["m5.*"]}
//	  total: {maxGroups: 100, maxTotalVCPU: 2048}                  # the whole cluster
//	  vcpus: {p5.48xlarge: 192}                                    # complements the built-in estimate
//	  awsLimits: {autoScalingGroupsPerRegion: 1000}                # AWS's quotas (defaults 30, 10, 500)
//
// A create or update past a bound is refused, naming the bound. Without
// the key, DefaultQuotas are in force (EffectiveQuotas); AWSLimits always
// are, at their defaults when not written.
type Quotas struct {
	PerNamespace *Quota           `json:"perNamespace,omitempty"`
	Namespaces   map[string]Quota `json:"namespaces,omitempty"`
	Total        *Quota           `json:"total,omitempty"`
	// VCPUs gives the vCPU count of instance types the built-in estimate
	// (from the size: large 2, xlarge 4, Nxlarge 4N, ...) does not know or
	// gets wrong.
	VCPUs map[string]int64 `json:"vcpus,omitempty"`
	// AWSLimits are the AWS quotas checked at admission (CheckAWSLimits).
	AWSLimits *AWSLimits `json:"awsLimits,omitempty"`
}

// Quota is one set of bounds; an absent field is no bound.
type Quota struct {
	// MaxGroups bounds the number of InstanceGroups.
	MaxGroups *int64 `json:"maxGroups,omitempty"`
	// MaxSize bounds each group's maxSize (instances).
	MaxSize *int64 `json:"maxSize,omitempty"`
	// MaxTotalVCPU bounds the sum over groups of maxSize x the vCPUs of
	// the largest instance type the group may launch.
	MaxTotalVCPU *int64 `json:"maxTotalVCPU,omitempty"`
	// InstanceTypes are the allowed instance types: exact ("m5.large") or
	// shell patterns ("m5.*", "c6?.large").
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// Tenancies are the allowed placement tenancies (default, dedicated,
	// host); an unset tenancy counts as default.
	Tenancies []string `json:"tenancies,omitempty"`
	// MaxVolumeSize bounds each volume's size and volSize (GiB).
	MaxVolumeSize *int64 `json:"maxVolumeSize,omitempty"`
	// MaxVolumeIops bounds each volume's provisioned IOPS.
	MaxVolumeIops *int64 `json:"maxVolumeIops,omitempty"`
	// MaxWarmPoolSize bounds a warm pool's maxSize (and minSize).
	MaxWarmPoolSize *int64 `json:"maxWarmPoolSize,omitempty"`
	// MaxConcurrentUpgrades bounds how many of the cluster-wide upgrade
	// slots the groups of one namespace hold at once.
	MaxConcurrentUpgrades *int64 `json:"maxConcurrentUpgrades,omitempty"`
}

// validate returns problems of a decoded Quotas, each starting with the
// field path below quotas.
func (q *Quotas) validate() []string {
	var out []string
	check := func(at string, qt *Quota) {
		if qt == nil {
			return
		}
		for name, v := range map[string]*int64{"maxGroups": qt.MaxGroups, "maxSize": qt.MaxSize, "maxTotalVCPU": qt.MaxTotalVCPU,
			"maxVolumeSize": qt.MaxVolumeSize, "maxVolumeIops": qt.MaxVolumeIops, "maxWarmPoolSize": qt.MaxWarmPoolSize,
			"maxConcurrentUpgrades": qt.MaxConcurrentUpgrades} {
			if v != nil && *v < 0 {
				out = append(out, fmt.Sprintf("%s.%s: %d is negative (valid: an integer >= 0)", at, name, *v))
			}
		}
		for i, p := range qt.InstanceTypes {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				out = append(out, fmt.Sprintf("%s.instanceTypes[%d]: %q is not an instance type or pattern like m5.*", at, i, p))
			}
		}
		for i, t := range qt.Tenancies {
			if t != "default" && t != "dedicated" && t != "host" {
				out = append(out, fmt.Sprintf("%s.tenancies[%d]: %q is not a tenancy (valid: default, dedicated, host)", at, i, t))
			}
		}
	}
	check("perNamespace", q.PerNamespace)
	for _, ns := range slices.Sorted(maps.Keys(q.Namespaces)) {
		qt := q.Namespaces[ns]
		check("namespaces."+ns, &qt)
	}
	if t := q.Total; t != nil {
		check("total", t)
		if t.MaxSize != nil || t.InstanceTypes != nil || t.Tenancies != nil || t.MaxVolumeSize != nil || t.MaxVolumeIops != nil || t.MaxWarmPoolSize != nil {
			out = append(out, "total: only maxGroups, maxTotalVCPU and maxConcurrentUpgrades bound the cluster as a whole; put per-group bounds in perNamespace")
		}
	}
	if l := q.AWSLimits; l != nil {
		for name, v := range map[string]*int64{"managedNodeGroupsPerCluster": l.ManagedNodeGroupsPerCluster,
			"fargateProfilesPerCluster": l.FargateProfilesPerCluster, "autoScalingGroupsPerRegion": l.AutoScalingGroupsPerRegion} {
			if v != nil && *v < 1 {
				out = append(out, fmt.Sprintf("awsLimits.%s: %d (valid: an integer >= 1, the AWS quota of the account)", name, *v))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(q.VCPUs)) {
		if q.VCPUs[k] < 1 {
			out = append(out, fmt.Sprintf("vcpus.%s: %d (valid: an integer >= 1)", k, q.VCPUs[k]))
		}
	}
	return out
}

// ForNamespace returns the bounds of namespace and where they are written
// (for messages), or nil when none apply. A nil Quotas has none.
func (q *Quotas) ForNamespace(namespace string) (*Quota, string) {
	if q == nil {
		return nil, ""
	}
	if qt, ok := q.Namespaces[namespace]; ok {
		return &qt, "quotas.namespaces." + namespace
	}
	return q.PerNamespace, "quotas.perNamespace"
}

// QuotasFor is c.Quotas.ForNamespace(namespace); a nil Config has none.
func (c *Config) QuotasFor(namespace string) (*Quota, string) {
	if c == nil {
		return nil, ""
	}
	return c.Quotas.ForNamespace(namespace)
}

// Check returns every bound ig breaks when it is added beside the other
// InstanceGroups of the cluster (ig itself, by namespace and name, is
// skipped among them). Each problem names the field, the bound in the
// ConfigMap and its value, e.g. "spec.eks.maxSize: 50 is above
// quotas.perNamespace.maxSize (10)". A nil Quotas bounds nothing.
func (q *Quotas) Check(ig *v1alpha1.InstanceGroup, others []v1alpha1.InstanceGroup) []string {
	return q.check(ig, others, true)
}

// CheckUpdate is Check for a change of an existing group: the number of
// groups does not change, so maxGroups is not checked (a namespace already
// past it, e.g. after the admin lowered it, still gets its groups'
// updates, finalizer removals included).
func (q *Quotas) CheckUpdate(ig *v1alpha1.InstanceGroup, others []v1alpha1.InstanceGroup) []string {
	return q.check(ig, others, false)
}

func (q *Quotas) check(ig *v1alpha1.InstanceGroup, others []v1alpha1.InstanceGroup, adding bool) []string {
	if q == nil {
		return nil
	}
	var out []string
	var same, all []*v1alpha1.InstanceGroup
	for i := range others {
		o := &others[i]
		if o.Namespace == ig.Namespace && o.Name == ig.Name {
			continue
		}
		all = append(all, o)
		if o.Namespace == ig.Namespace {
			same = append(same, o)
		}
	}
	if qt, at := q.ForNamespace(ig.Namespace); qt != nil {
		out = append(out, q.checkGroup(ig, qt, at)...)
		out = append(out, q.checkAggregate(ig, same, qt, at, "namespace "+ig.Namespace, adding)...)
	}
	if q.Total != nil {
		out = append(out, q.checkAggregate(ig, all, q.Total, "quotas.total", "the cluster", adding)...)
	}
	return out
}

func (q *Quotas) checkAggregate(ig *v1alpha1.InstanceGroup, others []*v1alpha1.InstanceGroup, qt *Quota, at, where string, adding bool) []string {
	var out []string
	if adding && qt.MaxGroups != nil && int64(len(others)+1) > *qt.MaxGroups {
		out = append(out, fmt.Sprintf("%d InstanceGroups in %s would be above %s.maxGroups (%d)", len(others)+1, where, at, *qt.MaxGroups))
	}
	if qt.MaxTotalVCPU != nil {
		total, err := q.vcpus(ig)
		if err != "" {
			return append(out, fmt.Sprintf("%s; %s.maxTotalVCPU needs it (add the type to quotas.vcpus)", err, at))
		}
		for _, o := range others {
			n, _ := q.vcpus(o) // an unknown type among existing groups counts as 0
			total = addSaturating(total, n)
		}
		if total > *qt.MaxTotalVCPU {
			out = append(out, fmt.Sprintf("%d vCPUs at maxSize in %s would be above %s.maxTotalVCPU (%d)", total, where, at, *qt.MaxTotalVCPU))
		}
	}
	return out
}

func (q *Quotas) checkGroup(ig *v1alpha1.InstanceGroup, qt *Quota, at string) []string {
	var out []string
	s := shapeOf(ig)
	if qt.MaxSize != nil && s.maxSize > *qt.MaxSize {
		out = append(out, fmt.Sprintf("%s.maxSize: %d is above %s.maxSize (%d)", s.section, s.maxSize, at, *qt.MaxSize))
	}
	if qt.InstanceTypes != nil {
		for _, t := range s.instanceTypes {
			if !matchesAny(t, qt.InstanceTypes) {
				out = append(out, fmt.Sprintf("instance type %q is not allowed by %s.instanceTypes (%s)", t, at, strings.Join(qt.InstanceTypes, ", ")))
			}
		}
		if s.subFamilyOf != "" && matchesAny(s.subFamilyOf, qt.InstanceTypes) {
			if probe, ok := subFamilyProbe(s.subFamilyOf); !ok || !matchesAny(probe, qt.InstanceTypes) {
				family, generation, _ := v1alpha1.SubFamilyOf(s.subFamilyOf)
				_, size, _ := strings.Cut(s.subFamilyOf, ".")
				out = append(out, fmt.Sprintf("spec.eks.configuration.mixedInstancesPolicy.instancePool: %s launches any type of the %s%s sub-family at size %s, which %s.instanceTypes (%s) does not allow as a whole (e.g. %s%s*.%s); list mixedInstancesPolicy.instanceTypes instead",
					v1alpha1.InstancePoolSubFamilyFlexible, family, generation, size, at, strings.Join(qt.InstanceTypes, ", "), family, generation, size))
			}
		}
	}
	if qt.Tenancies != nil && !slices.Contains(qt.Tenancies, s.tenancy) {
		out = append(out, fmt.Sprintf("tenancy %q is not allowed by %s.tenancies (%s)", s.tenancy, at, strings.Join(qt.Tenancies, ", ")))
	}
	for _, v := range s.volumes {
		if qt.MaxVolumeSize != nil && v.size > *qt.MaxVolumeSize {
			out = append(out, fmt.Sprintf("%s: %d GiB is above %s.maxVolumeSize (%d)", v.path, v.size, at, *qt.MaxVolumeSize))
		}
		if qt.MaxVolumeIops != nil && v.iops > *qt.MaxVolumeIops {
			out = append(out, fmt.Sprintf("%s: %d IOPS is above %s.maxVolumeIops (%d)", v.path, v.iops, at, *qt.MaxVolumeIops))
		}
	}
	if qt.MaxWarmPoolSize != nil && s.warmPool > *qt.MaxWarmPoolSize {
		out = append(out, fmt.Sprintf("spec.eks.warmPool: %d instances is above %s.maxWarmPoolSize (%d)", s.warmPool, at, *qt.MaxWarmPoolSize))
	}
	return out
}

type volumeShape struct {
	path       string
	size, iops int64
}

// groupShape is what the quotas look at, whatever the provisioner.
type groupShape struct {
	section       string
	maxSize       int64
	instanceTypes []string
	tenancy       string
	volumes       []volumeShape
	warmPool      int64
	// subFamilyOf is the base type of instancePool SubFamilyFlexible,
	// whose derived types (same vCPUs as the base) are not listed.
	subFamilyOf string
}

func shapeOf(ig *v1alpha1.InstanceGroup) groupShape {
	s := groupShape{tenancy: "default"}
	switch {
	case ig.Spec.EKSManaged != nil && ig.Spec.Provisioner == v1alpha1.ProvisionerEKSManaged:
		m := ig.Spec.EKSManaged
		s.section, s.maxSize = "spec.eks-managed", m.MaxSize
		if c := m.Configuration; c != nil {
			if c.InstanceType != "" {
				s.instanceTypes = append(s.instanceTypes, c.InstanceType)
			}
			s.instanceTypes = append(s.instanceTypes, c.InstanceTypes...)
			if c.VolSize > 0 {
				s.volumes = append(s.volumes, volumeShape{path: "spec.eks-managed.configuration.volSize", size: c.VolSize})
			}
		}
		if len(s.instanceTypes) == 0 {
			// EKS launches its default type: counted like a listed one.
			amiType := ""
			if m.Configuration != nil {
				amiType = m.Configuration.AmiType
			}
			s.instanceTypes = []string{eksManagedDefaultType(amiType)}
		}
	case ig.Spec.EKS != nil && ig.Spec.Provisioner != v1alpha1.ProvisionerEKSFargate:
		e := ig.Spec.EKS
		s.section, s.maxSize = "spec.eks", e.MaxSize
		if e.WarmPool != nil {
			s.warmPool = max(e.WarmPool.MinSize, e.WarmPool.MaxSize)
		}
		if c := e.Configuration; c != nil {
			if c.InstanceType != "" {
				s.instanceTypes = append(s.instanceTypes, c.InstanceType)
			}
			if m := c.MixedInstancesPolicy; m != nil {
				for _, t := range m.InstanceTypes {
					s.instanceTypes = append(s.instanceTypes, t.Type)
				}
				if len(m.InstanceTypes) == 0 && strings.EqualFold(m.InstancePool, v1alpha1.InstancePoolSubFamilyFlexible) {
					s.subFamilyOf = c.InstanceType
				}
			}
			if c.Placement != nil && c.Placement.Tenancy != "" {
				s.tenancy = c.Placement.Tenancy
			}
			if c.VolSize > 0 {
				s.volumes = append(s.volumes, volumeShape{path: "spec.eks.configuration.volSize", size: c.VolSize})
			}
			for i, v := range c.Volumes {
				s.volumes = append(s.volumes, volumeShape{path: fmt.Sprintf("spec.eks.configuration.volumes[%d]", i), size: v.Size, iops: v.Iops})
			}
		}
	default:
		s.section = "spec"
	}
	return s
}

// vcpus is maxSize x the vCPUs of the group's largest instance type; the
// error names a type whose vCPUs are unknown.
func (q *Quotas) vcpus(ig *v1alpha1.InstanceGroup) (int64, string) {
	s := shapeOf(ig)
	var most int64
	for _, t := range s.instanceTypes {
		n, ok := q.VCPUs[t]
		if !ok {
			n, ok = estimateVCPUs(t)
		}
		if !ok {
			return 0, fmt.Sprintf("the vCPUs of instance type %q are unknown", t)
		}
		most = max(most, n)
	}
	return mulSaturating(s.maxSize, most), ""
}

// mulSaturating is a*b for non-negative a and b, or math.MaxInt64 when it
// would overflow: a quota compares against it, and a wrapped (negative)
// product would pass every quota and lower every later sum.
func mulSaturating(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return max(a, 0) * max(b, 0)
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addSaturating is a+b for non-negative a and b, or math.MaxInt64 when it
// would overflow.
func addSaturating(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

var sizeMultiple = regexp.MustCompile(`^([0-9]+)xlarge$`)

// estimateVCPUs estimates the vCPUs of an EC2 instance type from its size:
// nano to medium 2 for burstable (t*) families and 1 otherwise, large 2,
// xlarge 4, Nxlarge 4N. Metal and unknown sizes are not estimated.
func estimateVCPUs(instanceType string) (int64, bool) {
	family, size, ok := strings.Cut(instanceType, ".")
	if !ok {
		return 0, false
	}
	switch size {
	case "nano", "micro", "small", "medium":
		if strings.HasPrefix(family, "t") {
			return 2, true
		}
		return 1, true
	case "large":
		return 2, true
	case "xlarge":
		return 4, true
	}
	if m := sizeMultiple.FindStringSubmatch(size); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 64)
		return 4 * n, err == nil && n > 0
	}
	return 0, false
}

func matchesAny(s string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}
