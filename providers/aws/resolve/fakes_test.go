package resolve

import (
	"context"
	"sync"
	"sync/atomic"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeCloud holds subnets, security groups (by id, with a Name tag and a
// VPC), images and SSM parameters, counts the calls per operation, and
// fails every call while fail is set. gate, when set, holds every call
// until it is closed.
type fakeCloud struct {
	awsp.EC2API
	subnets, groups map[string][2]string // id -> {Name, VPC}
	images          map[string]ec2types.Image
	params          map[string]string
	fail            error
	gate            chan struct{}

	mu    sync.Mutex
	calls map[string]int
	total atomic.Int32
}

func newFakeCloud() *fakeCloud {
	return &fakeCloud{
		subnets: map[string][2]string{"subnet-a": {"private-a", "vpc-1"}, "subnet-b": {"private-b", "vpc-1"},
			"subnet-c": {"shared", "vpc-1"}, "subnet-d": {"shared", "vpc-2"}},
		groups: map[string][2]string{"sg-a": {"nodes", "vpc-1"}},
		images: map[string]ec2types.Image{
			"ami-x86": {Architecture: ec2types.ArchitectureValuesX8664, OwnerId: awssdk.String("111122223333")},
			"ami-arm": {Architecture: ec2types.ArchitectureValuesArm64, OwnerId: awssdk.String("602401143452"), ImageOwnerAlias: awssdk.String("amazon")},
		},
		params: map[string]string{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id": "ami-x86", "/mine/ami": "ami-arm"},
		calls:  map[string]int{},
	}
}

func (f *fakeCloud) call(op string) error {
	f.mu.Lock()
	f.calls[op]++
	gate := f.gate
	f.mu.Unlock()
	f.total.Add(1)
	if gate != nil {
		<-gate
	}
	return f.fail
}

func (f *fakeCloud) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func match(all map[string][2]string, filters []ec2types.Filter, idFilter string) [][3]string {
	var out [][3]string
	for id, nv := range all {
		for _, flt := range filters {
			for _, v := range flt.Values {
				if (*flt.Name == "tag:Name" && v == nv[0]) || (*flt.Name == idFilter && v == id) {
					out = append(out, [3]string{id, nv[0], nv[1]})
				}
			}
		}
	}
	return out
}

func (f *fakeCloud) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	if err := f.call("DescribeSubnets"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeSubnetsOutput{}
	for _, m := range match(f.subnets, in.Filters, "subnet-id") {
		out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: awssdk.String(m[0]), VpcId: awssdk.String(m[2]),
			Tags: []ec2types.Tag{{Key: awssdk.String("Name"), Value: awssdk.String(m[1])}}})
	}
	return out, nil
}

func (f *fakeCloud) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	if err := f.call("DescribeSecurityGroups"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeSecurityGroupsOutput{}
	for _, m := range match(f.groups, in.Filters, "group-id") {
		out.SecurityGroups = append(out.SecurityGroups, ec2types.SecurityGroup{GroupId: awssdk.String(m[0]), VpcId: awssdk.String(m[2])})
	}
	return out, nil
}

func (f *fakeCloud) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	if err := f.call("DescribeImages"); err != nil {
		return nil, err
	}
	id := in.ImageIds[0]
	if id == "ami-bad!" {
		return nil, &smithy.GenericAPIError{Code: "InvalidAMIID.Malformed", Message: "malformed"}
	}
	im, ok := f.images[id]
	if !ok {
		return nil, &smithy.GenericAPIError{Code: "InvalidAMIID.NotFound", Message: "not found"}
	}
	im.ImageId = awssdk.String(id)
	return &ec2.DescribeImagesOutput{Images: []ec2types.Image{im}}, nil
}

func (f *fakeCloud) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	if err := f.call("GetParameter"); err != nil {
		return nil, err
	}
	v, ok := f.params[*in.Name]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{Message: awssdk.String("no")}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: awssdk.String(v)}}, nil
}
