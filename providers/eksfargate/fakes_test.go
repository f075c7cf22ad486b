package eksfargate

import (
	"context"
	"maps"
	"sort"
	"strconv"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeEKS holds the Fargate profiles of cluster "prod" as AWS treats
// them: a profile is CREATING or DELETING until settle(), only one
// profile of the cluster may be CREATING or DELETING at a time (others
// are refused with ResourceInUseException), and listings come in pages
// of two. moto makes profiles ACTIVE and removes them at once, so the
// ordering of a replacement is tested here.
type fakeEKS struct {
	awsp.EKSAPI // calls outside the subset panic
	profiles    map[string]*ekstypes.FargateProfile
	calls       []string
	lists       int            // ListFargateProfiles pages served
	describes   map[string]int // DescribeFargateProfile by name
}

func newFakeEKS() *fakeEKS { return &fakeEKS{profiles: map[string]*ekstypes.FargateProfile{}} }

func notFound() error {
	return &ekstypes.ResourceNotFoundException{Message: awssdk.String("not found")}
}

func inUse() error {
	return &ekstypes.ResourceInUseException{Message: awssdk.String("in use")}
}

func (f *fakeEKS) busy() bool {
	for _, p := range f.profiles {
		if p.Status == ekstypes.FargateProfileStatusCreating || p.Status == ekstypes.FargateProfileStatusDeleting {
			return true
		}
	}
	return false
}

func (f *fakeEKS) add(name, owner string, status ekstypes.FargateProfileStatus) {
	f.profiles[name] = &ekstypes.FargateProfile{FargateProfileName: awssdk.String(name), Status: status,
		Tags: map[string]string{"instancemgr.keikoproj.io/instancegroup": owner}}
}

func (f *fakeEKS) CreateFargateProfile(_ context.Context, in *eks.CreateFargateProfileInput, _ ...func(*eks.Options)) (*eks.CreateFargateProfileOutput, error) {
	f.calls = append(f.calls, "Create "+*in.FargateProfileName)
	if *in.ClusterName != "prod" {
		return nil, notFound()
	}
	if _, ok := f.profiles[*in.FargateProfileName]; ok || f.busy() {
		return nil, inUse()
	}
	p := &ekstypes.FargateProfile{FargateProfileName: in.FargateProfileName, ClusterName: in.ClusterName, PodExecutionRoleArn: in.PodExecutionRoleArn,
		Subnets: in.Subnets, Selectors: in.Selectors, Tags: in.Tags, Status: ekstypes.FargateProfileStatusCreating,
		FargateProfileArn: awssdk.String("arn:aws:eks:us-west-2:123456789012:fargateprofile/" + *in.ClusterName + "/" + *in.FargateProfileName + "/1a2b")}
	f.profiles[*in.FargateProfileName] = p
	c := *p
	return &eks.CreateFargateProfileOutput{FargateProfile: &c}, nil
}

func (f *fakeEKS) DescribeFargateProfile(_ context.Context, in *eks.DescribeFargateProfileInput, _ ...func(*eks.Options)) (*eks.DescribeFargateProfileOutput, error) {
	if f.describes == nil {
		f.describes = map[string]int{}
	}
	f.describes[*in.FargateProfileName]++
	p, ok := f.profiles[*in.FargateProfileName]
	if !ok || *in.ClusterName != "prod" {
		return nil, notFound()
	}
	c := *p
	return &eks.DescribeFargateProfileOutput{FargateProfile: &c}, nil
}

func (f *fakeEKS) ListFargateProfiles(_ context.Context, in *eks.ListFargateProfilesInput, _ ...func(*eks.Options)) (*eks.ListFargateProfilesOutput, error) {
	f.lists++
	if *in.ClusterName != "prod" {
		return nil, notFound()
	}
	var names []string
	for n := range f.profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	out := &eks.ListFargateProfilesOutput{FargateProfileNames: names[start:min(start+2, len(names))]}
	if start+2 < len(names) {
		out.NextToken = awssdk.String(strconv.Itoa(start + 2))
	}
	return out, nil
}

func (f *fakeEKS) DeleteFargateProfile(_ context.Context, in *eks.DeleteFargateProfileInput, _ ...func(*eks.Options)) (*eks.DeleteFargateProfileOutput, error) {
	f.calls = append(f.calls, "Delete "+*in.FargateProfileName)
	p, ok := f.profiles[*in.FargateProfileName]
	if !ok {
		return nil, notFound()
	}
	if f.busy() {
		return nil, inUse()
	}
	p.Status = ekstypes.FargateProfileStatusDeleting
	return &eks.DeleteFargateProfileOutput{}, nil
}

// TagResource adds or replaces a profile's tags (by its ARN).
func (f *fakeEKS) TagResource(_ context.Context, in *eks.TagResourceInput, _ ...func(*eks.Options)) (*eks.TagResourceOutput, error) {
	f.calls = append(f.calls, "TagResource "+*in.ResourceArn)
	for _, p := range f.profiles {
		if awssdk.ToString(p.FargateProfileArn) == *in.ResourceArn {
			p.Tags = maps.Clone(p.Tags)
			maps.Copy(p.Tags, in.Tags)
			return &eks.TagResourceOutput{}, nil
		}
	}
	return nil, notFound()
}

// settle finishes what EKS was doing.
func (f *fakeEKS) settle() {
	for name, p := range f.profiles {
		switch p.Status {
		case ekstypes.FargateProfileStatusCreating:
			p.Status = ekstypes.FargateProfileStatusActive
		case ekstypes.FargateProfileStatusDeleting:
			delete(f.profiles, name)
		}
	}
}

func (f *fakeEKS) takeCalls() []string {
	out := f.calls
	f.calls = nil
	return out
}

// owned lists the profiles tagged for owner.
func (f *fakeEKS) owned(owner string) []string {
	var out []string
	for n, p := range f.profiles {
		if p.Tags["instancemgr.keikoproj.io/instancegroup"] == owner {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// fakeEC2 knows subnets by id.
type fakeEC2 struct {
	awsp.EC2API
	subnets map[string]bool
}

func (f *fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, flt := range in.Filters {
		for _, v := range flt.Values {
			if *flt.Name == "subnet-id" && f.subnets[v] {
				out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: awssdk.String(v)})
			}
		}
	}
	return out, nil
}

// fakeIAM knows roles by name (the owned role's lifecycle is shared with
// the other provisioners and tested in providers/eksmanaged and the
// end-to-end suite).
type fakeIAM struct {
	awsp.IAMAPI
	roles map[string]bool
}

func (f *fakeIAM) GetRole(_ context.Context, in *iam.GetRoleInput, _ ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	if !f.roles[*in.RoleName] {
		return nil, &iamtypes.NoSuchEntityException{Message: awssdk.String("no such entity")}
	}
	return &iam.GetRoleOutput{Role: &iamtypes.Role{RoleName: in.RoleName}}, nil
}
