package eks

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

func TestSubFamilyOf(t *testing.T) {
	for in, want := range map[string]string{
		"m5.xlarge": "m 5", "m5ad.xlarge": "m 5", "c7gn.large": "c 7", "m7i-flex.large": "m 7", "x2iedn.xlarge": "x 2",
		"u-6tb1.metal": "", "mac1": "", "5.large": "", "m.large": "",
	} {
		f, g, ok := v1alpha1.SubFamilyOf(in)
		got := ""
		if ok {
			got = f + " " + g
		}
		if got != want {
			t.Errorf("SubFamilyOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeInstanceTypes answers DescribeInstanceTypes from a table, honouring
// the vCPU, memory and architecture filters, and counts calls.
type fakeInstanceTypes struct {
	awsp.EC2API
	types []ec2types.InstanceTypeInfo
	calls int
}

func itype(name string, vcpus int32, mib int64, arch ec2types.ArchitectureType) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{InstanceType: ec2types.InstanceType(name), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: awssdk.Int32(vcpus)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: awssdk.Int64(mib)}, ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}}}
}

func (f *fakeInstanceTypes) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.calls++
	out := &ec2.DescribeInstanceTypesOutput{}
	for _, t := range f.types {
		if len(in.InstanceTypes) > 0 && !slices.Contains(in.InstanceTypes, t.InstanceType) {
			continue
		}
		keep := true
		for _, flt := range in.Filters {
			var v string
			switch awssdk.ToString(flt.Name) {
			case "vcpu-info.default-vcpus":
				v = strconv.Itoa(int(awssdk.ToInt32(t.VCpuInfo.DefaultVCpus)))
			case "memory-info.size-in-mib":
				v = strconv.FormatInt(awssdk.ToInt64(t.MemoryInfo.SizeInMiB), 10)
			case "processor-info.supported-architecture":
				v = string(t.ProcessorInfo.SupportedArchitectures[0])
			}
			keep = keep && slices.Contains(flt.Values, v)
		}
		if keep {
			out.InstanceTypes = append(out.InstanceTypes, t)
		}
	}
	return out, nil
}

func TestSubFamilyFlexibleResolvesTheFamilyOnce(t *testing.T) {
	f := &fakeInstanceTypes{types: []ec2types.InstanceTypeInfo{
		itype("m5.xlarge", 4, 16384, "x86_64"), itype("m5a.xlarge", 4, 16384, "x86_64"), itype("m5d.xlarge", 4, 16384, "x86_64"),
		itype("m5.2xlarge", 8, 32768, "x86_64"),  // another size
		itype("m6i.xlarge", 4, 16384, "x86_64"),  // another generation
		itype("c5.xlarge", 4, 8192, "x86_64"),    // another family
		itype("t3.xlarge", 4, 16384, "x86_64"),   // another family, same size
		itype("m5zz.xlarge", 4, 16384, "arm64"),  // another architecture (one AMI must run on all)
		itype("m5dn.xlarge", 4, 16384, "x86_64"), // listed after others: the result is sorted
	}}
	now := time.Unix(0, 0)
	pools := &instancePools{api: f, ttl: time.Hour, now: func() time.Time { return now }}
	got, err := pools.subFamilyFlexible(context.Background(), "m5.xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"m5.xlarge", "m5a.xlarge", "m5d.xlarge", "m5dn.xlarge"}; !slices.Equal(got, want) {
		t.Errorf("SubFamilyFlexible of m5.xlarge = %v, want %v", got, want)
	}
	calls := f.calls
	if _, err := pools.subFamilyFlexible(context.Background(), "m5.xlarge"); err != nil || f.calls != calls {
		t.Errorf("a second resolution made %d more calls (err %v), want it cached", f.calls-calls, err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := pools.subFamilyFlexible(context.Background(), "m5.xlarge"); err != nil || f.calls == calls {
		t.Errorf("the cache never expires (err %v)", err)
	}

	ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "m5.xlarge", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}})
	types, err := instanceTypesOf(context.Background(), pools, ig)
	if err != nil || len(types) != 4 || types[0].Type != "m5.xlarge" || types[0].Weight != 0 {
		t.Errorf("instanceTypesOf(SubFamilyFlexible) = %v, %v; want the four types, unweighted", types, err)
	}
	p := mixedPolicyOf(ig, groupSpec{template: "lt", version: 3, instanceTypes: types}).sdk()
	if n := len(p.LaunchTemplate.Overrides); n != 4 {
		t.Errorf("the policy overrides %d instance types, want the 4 resolved", n)
	}
}

func TestInstanceTypesOfRefusesWhatCannotBeBuilt(t *testing.T) {
	pools := &instancePools{api: &fakeInstanceTypes{types: []ec2types.InstanceTypeInfo{itype("m5.xlarge", 4, 16384, "x86_64")}}, ttl: time.Hour, now: time.Now}
	for _, tc := range []struct {
		name     string
		c        v1alpha1.EKSConfiguration
		field    string
		contains string
	}{
		{"partial weights (admitted by an earlier version)", v1alpha1.EKSConfiguration{InstanceType: "m5.xlarge", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{
			InstanceTypes: []v1alpha1.InstanceTypeSpec{{Type: "m5.xlarge", Weight: 1}, {Type: "m5.2xlarge"}}}},
			"spec.eks.configuration.mixedInstancesPolicy.instanceTypes[1].weight", "all or none"},
		{"a base type the region does not offer", v1alpha1.EKSConfiguration{InstanceType: "m5.huge", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{
			InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}},
			"spec.eks.configuration.instanceType", "not an instance type offered in this region"},
		{"a base type without a family", v1alpha1.EKSConfiguration{InstanceType: "u-6tb1.metal", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{
			InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}},
			"spec.eks.configuration.instanceType", "no family and generation"},
		{"an unknown pool", v1alpha1.EKSConfiguration{InstanceType: "m5.xlarge", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{
			InstancePool: "Anything"}},
			"spec.eks.configuration.mixedInstancesPolicy.instancePool", "SubFamilyFlexible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := instanceTypesOf(context.Background(), pools, eksGroup(tc.c))
			var se *providers.SpecError
			if !errors.As(err, &se) || se.Field != tc.field || !strings.Contains(se.Detail, tc.contains) {
				t.Errorf("instanceTypesOf = %v, want a SpecError on %s containing %q", err, tc.field, tc.contains)
			}
		})
	}
}

func TestInstanceWeight(t *testing.T) {
	weights := weightsOf([]v1alpha1.InstanceTypeSpec{{Type: "t3.medium", Weight: 1}, {Type: "t3.large", Weight: 2}})
	cases := []struct {
		in   astypes.Instance
		want int
	}{
		{astypes.Instance{InstanceType: awssdk.String("t3.large")}, 2},                                           // from the policy (an emulator reports no weight)
		{astypes.Instance{InstanceType: awssdk.String("t3.large"), WeightedCapacity: awssdk.String("3")}, 3},     // AWS's word wins (a weight changed since launch)
		{astypes.Instance{InstanceType: awssdk.String("m5.large")}, 1},                                           // a type no longer listed, no weight reported
		{astypes.Instance{InstanceType: awssdk.String("t3.medium"), WeightedCapacity: awssdk.String("junk")}, 1}, // unreadable: the policy's
	}
	for _, c := range cases {
		if got := instanceWeight(c.in, weights); got != c.want {
			t.Errorf("instanceWeight(%s, %s) = %d, want %d", awssdk.ToString(c.in.InstanceType), awssdk.ToString(c.in.WeightedCapacity), got, c.want)
		}
	}
	if weightsOf([]v1alpha1.InstanceTypeSpec{{Type: "t3.medium"}}) != nil {
		t.Error("an unweighted policy has weights")
	}
}

// TestMixedPolicyHashIsPinned pins the hash recorded in the group's
// mixed-instances-policy tag; a change makes every mixed group send one
// UpdateAutoScalingGroup (no instance is replaced by it).
func TestMixedPolicyHashIsPinned(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "t3.large", MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{
		Strategy: "LowestPrice", SpotPools: awssdk.Int64(3), BaseCapacity: awssdk.Int64(1)}})
	g := groupSpec{template: "lt", version: 4, instanceTypes: []v1alpha1.InstanceTypeSpec{{Type: "t3.large", Weight: 2}, {Type: "t3.medium", Weight: 1}}}
	p := mixedPolicyOf(ig, g)
	if got, want := p.hash(), "717c00b2ae866ae8"; got != want {
		t.Errorf("mixed policy hash = %s, pinned %s", got, want)
	}
	sdk := p.sdk()
	if o := sdk.LaunchTemplate.Overrides; awssdk.ToString(o[0].WeightedCapacity) != "2" || awssdk.ToString(o[1].WeightedCapacity) != "1" {
		t.Errorf("weights not sent: %+v", o)
	}
	if d := sdk.InstancesDistribution; awssdk.ToInt32(d.SpotInstancePools) != 3 || awssdk.ToString(d.SpotAllocationStrategy) != "lowest-price" || awssdk.ToInt32(d.OnDemandBaseCapacity) != 1 {
		t.Errorf("distribution: %+v", d)
	}
}
