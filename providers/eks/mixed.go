package eks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// mixedPolicy is this project's own description of the Auto Scaling
// group's mixed instances policy: the fields the controller sets. Its hash
// (mixedPolicy.hash) is recorded in the group's tagMixedHash tag, so a
// change is one string compare and never depends on how the AWS SDK
// serializes its types.
type mixedPolicy struct {
	Template string
	Version  int64
	// Overrides are the instance types in order, with their weights (0:
	// unweighted; either every type has a weight or none).
	Overrides       []v1alpha1.InstanceTypeSpec
	OnDemandBase    int32
	OnDemandPercent int32
	SpotStrategy    string
	// SpotPools is 0 when not set (only with lowest-price).
	SpotPools int32
}

// maxOverrides is how many instance types a mixed instances policy may
// list (Auto Scaling's limit).
const maxOverrides = 40

// mixedPolicyOf is the mixed instances policy of ig for the group g with
// the instance types types (the spec's, or those instancePool resolved);
// nil without a mixedInstancesPolicy.
func mixedPolicyOf(ig *v1alpha1.InstanceGroup, g groupSpec) *mixedPolicy {
	m := ig.Spec.EKS.Configuration.MixedInstancesPolicy
	if m == nil {
		return nil
	}
	p := &mixedPolicy{Template: g.template, Version: g.version, Overrides: g.instanceTypes,
		OnDemandPercent: int32(100 - spotPercent(m)), SpotStrategy: "capacity-optimized"}
	if len(p.Overrides) == 0 {
		p.Overrides = []v1alpha1.InstanceTypeSpec{{Type: ig.Spec.EKS.Configuration.InstanceType}}
	}
	switch m.Strategy {
	case "LowestPrice":
		p.SpotStrategy = "lowest-price"
	case "PriceCapacityOptimized":
		p.SpotStrategy = "price-capacity-optimized"
	}
	if m.BaseCapacity != nil {
		p.OnDemandBase = int32(*m.BaseCapacity)
	}
	if m.SpotPools != nil && p.SpotStrategy == "lowest-price" {
		p.SpotPools = int32(*m.SpotPools)
	}
	return p
}

// hash identifies p: 8 bytes of the SHA-256 of a fixed-order encoding.
func (p *mixedPolicy) hash() string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(v)) }
	line("encoding", "v2")
	line("template", p.Template)
	line("version", strconv.FormatInt(p.Version, 10))
	line("overrides", strconv.Itoa(len(p.Overrides)))
	for _, o := range p.Overrides {
		line("override.type", o.Type)
		line("override.weight", strconv.FormatInt(o.Weight, 10))
	}
	line("onDemandBase", strconv.Itoa(int(p.OnDemandBase)))
	line("onDemandPercent", strconv.Itoa(int(p.OnDemandPercent)))
	line("spotStrategy", p.SpotStrategy)
	line("spotPools", strconv.Itoa(int(p.SpotPools)))
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// sdk is p as an Auto Scaling MixedInstancesPolicy.
func (p *mixedPolicy) sdk() *astypes.MixedInstancesPolicy {
	overrides := make([]astypes.LaunchTemplateOverrides, 0, len(p.Overrides))
	for _, t := range p.Overrides {
		o := astypes.LaunchTemplateOverrides{InstanceType: awssdk.String(t.Type)}
		if t.Weight > 0 {
			o.WeightedCapacity = awssdk.String(strconv.FormatInt(t.Weight, 10))
		}
		overrides = append(overrides, o)
	}
	dist := &astypes.InstancesDistribution{
		OnDemandBaseCapacity:                awssdk.Int32(p.OnDemandBase),
		OnDemandPercentageAboveBaseCapacity: awssdk.Int32(p.OnDemandPercent),
		SpotAllocationStrategy:              awssdk.String(p.SpotStrategy),
	}
	if p.SpotPools > 0 {
		dist.SpotInstancePools = awssdk.Int32(p.SpotPools)
	}
	return &astypes.MixedInstancesPolicy{
		LaunchTemplate: &astypes.LaunchTemplate{
			LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String(p.Template), Version: awssdk.String(strconv.FormatInt(p.Version, 10))},
			Overrides:                   overrides,
		},
		InstancesDistribution: dist,
	}
}

// instanceTypesOf returns the instance types of ig's mixed instances
// policy: spec.eks.configuration.mixedInstancesPolicy.instanceTypes, or
// those instancePool SubFamilyFlexible resolves (pools). A *SpecError names
// the field when the weights are partial or the pool cannot be resolved.
func instanceTypesOf(ctx context.Context, pools *instancePools, ig *v1alpha1.InstanceGroup) ([]v1alpha1.InstanceTypeSpec, error) {
	c := ig.Spec.EKS.Configuration
	m := c.MixedInstancesPolicy
	if m == nil {
		return nil, nil
	}
	const field = "spec.eks.configuration.mixedInstancesPolicy"
	if i, ok := m.PartialWeight(); ok {
		return nil, &providers.SpecError{Field: fmt.Sprintf("%s.instanceTypes[%d].weight", field, i),
			Detail: "weights are all or none: some instance types have a weight and this one has none (Auto Scaling refuses partial weights)"}
	}
	if len(m.InstanceTypes) > 0 {
		return m.InstanceTypes, nil
	}
	switch m.InstancePool {
	case v1alpha1.InstancePoolSubFamilyFlexible:
		types, err := pools.subFamilyFlexible(ctx, c.InstanceType)
		if err != nil {
			return nil, err
		}
		out := make([]v1alpha1.InstanceTypeSpec, 0, len(types))
		for _, t := range types {
			out = append(out, v1alpha1.InstanceTypeSpec{Type: t})
		}
		return out, nil
	case "":
		return nil, nil // the base instance type alone
	default:
		return nil, &providers.SpecError{Field: field + ".instancePool", Detail: fmt.Sprintf("%q is not supported; the only instance pool is %s", m.InstancePool, v1alpha1.InstancePoolSubFamilyFlexible)}
	}
}

// instancePools resolves instance pools from EC2 DescribeInstanceTypes,
// caching each answer (instance type data changes rarely).
type instancePools struct {
	api awsp.EC2API
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]pooled
}

type pooled struct {
	types []string
	at    time.Time
}

// subFamilyFlexible returns base and the instance types of its sub-family
// offered in the region: the same family letters and generation (m5 for
// m5.xlarge: m5, m5a, m5ad, m5d, m5dn, m5n, m5zn), the same vCPUs and
// memory, and a processor architecture of base (so one AMI runs on all).
// base comes first, then the others sorted, at most maxOverrides. A
// *SpecError names spec.eks.configuration.instanceType when base is not an
// instance type offered in the region or has no parseable family.
func (p *instancePools) subFamilyFlexible(ctx context.Context, base string) ([]string, error) {
	p.mu.Lock()
	if c, ok := p.cache[base]; ok && p.now().Sub(c.at) < p.ttl {
		p.mu.Unlock()
		return c.types, nil
	}
	p.mu.Unlock()

	field := "spec.eks.configuration.instanceType"
	family, generation, ok := subFamily(base)
	if !ok {
		return nil, &providers.SpecError{Field: field, Detail: fmt.Sprintf("%q has no family and generation (such as m5 in m5.xlarge), so instancePool SubFamilyFlexible cannot derive instance types from it; list mixedInstancesPolicy.instanceTypes instead", base)}
	}
	out, err := p.api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(base)}})
	if err != nil && !isCode(err, "InvalidInstanceType") {
		return nil, fmt.Errorf("ec2 DescribeInstanceTypes %s: %w", base, err)
	}
	if err != nil || len(out.InstanceTypes) == 0 {
		return nil, &providers.SpecError{Field: field, Detail: fmt.Sprintf("%q is not an instance type offered in this region, so instancePool SubFamilyFlexible cannot derive instance types from it", base)}
	}
	info := out.InstanceTypes[0]
	if info.VCpuInfo == nil || info.MemoryInfo == nil || info.ProcessorInfo == nil {
		return nil, &providers.SpecError{Field: field, Detail: fmt.Sprintf("EC2 reports no vCPU, memory or processor data for %q, so instancePool SubFamilyFlexible cannot match types to it; list mixedInstancesPolicy.instanceTypes instead", base)}
	}
	var archs []string
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		archs = append(archs, string(a))
	}
	in := &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("vcpu-info.default-vcpus"), Values: []string{strconv.Itoa(int(awssdk.ToInt32(info.VCpuInfo.DefaultVCpus)))}},
		{Name: awssdk.String("memory-info.size-in-mib"), Values: []string{strconv.FormatInt(awssdk.ToInt64(info.MemoryInfo.SizeInMiB), 10)}},
		{Name: awssdk.String("processor-info.supported-architecture"), Values: archs},
	}}
	types := []string{base}
	var others []string
	pages := ec2.NewDescribeInstanceTypesPaginator(p.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeInstanceTypes (the %s%s sub-family of %s): %w", family, generation, base, err)
		}
		for _, t := range page.InstanceTypes {
			name := string(t.InstanceType)
			f, g, ok := subFamily(name)
			if !ok || f != family || g != generation || name == base || slices.Contains(others, name) {
				continue
			}
			if t.ProcessorInfo != nil && !sharesArch(t.ProcessorInfo.SupportedArchitectures, archs) {
				continue
			}
			others = append(others, name)
		}
	}
	slices.Sort(others)
	types = append(types, others...)
	if len(types) > maxOverrides {
		types = types[:maxOverrides]
	}
	p.mu.Lock()
	if p.cache == nil {
		p.cache = map[string]pooled{}
	}
	p.cache[base] = pooled{types: types, at: p.now()}
	p.mu.Unlock()
	return types, nil
}

func subFamily(instanceType string) (family, generation string, ok bool) {
	return v1alpha1.SubFamilyOf(instanceType)
}

func sharesArch(have []ec2types.ArchitectureType, want []string) bool {
	for _, a := range have {
		if slices.Contains(want, string(a)) {
			return true
		}
	}
	return false
}

// weightsOf maps each instance type of a weighted mixed instances policy
// to its weight; nil when the group is not weighted (every instance
// counts 1).
func weightsOf(types []v1alpha1.InstanceTypeSpec) map[string]int {
	var out map[string]int
	for _, t := range types {
		if t.Weight > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[t.Type] = int(t.Weight)
		}
	}
	return out
}

// instanceWeight is the capacity units an instance counts for: the
// weight Auto Scaling reports for it (WeightedCapacity), else the weight
// of its instance type in the policy (an emulator may not report it), else
// 1. Instances of a type no longer in the policy keep the weight AWS
// reports for them.
func instanceWeight(in astypes.Instance, weights map[string]int) int {
	if w, err := strconv.Atoi(awssdk.ToString(in.WeightedCapacity)); err == nil && w > 0 {
		return w
	}
	if w := weights[awssdk.ToString(in.InstanceType)]; w > 0 {
		return w
	}
	return 1
}

func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}
