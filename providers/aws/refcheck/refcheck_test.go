package refcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
)

// fakeCloud holds a cluster "prod" in vpc-1 (ACTIVE) and "new" (CREATING),
// subnet-a in vpc-1, subnet-b in vpc-2, sg-a in vpc-1, an x86_64 image and
// an arm64 one, and counts calls.
type fakeCloud struct {
	awsp.EC2API
	awsp.EKSAPI
	calls int
}

func (f *fakeCloud) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	f.calls++
	switch *in.Name {
	case "prod":
		return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Status: ekstypes.ClusterStatusActive, ResourcesVpcConfig: &ekstypes.VpcConfigResponse{VpcId: awssdk.String("vpc-1")}}}, nil
	case "new":
		return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Status: ekstypes.ClusterStatusCreating}}, nil
	}
	return nil, &ekstypes.ResourceNotFoundException{Message: awssdk.String("no")}
}

func (f *fakeCloud) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.calls++
	vpc := map[string]string{"subnet-a": "vpc-1", "subnet-b": "vpc-2"}[in.Filters[0].Values[0]]
	if vpc == "" {
		return &ec2.DescribeSubnetsOutput{}, nil
	}
	return &ec2.DescribeSubnetsOutput{Subnets: []ec2types.Subnet{{VpcId: awssdk.String(vpc)}}}, nil
}

func (f *fakeCloud) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	f.calls++
	if in.Filters[0].Values[0] != "sg-a" {
		return &ec2.DescribeSecurityGroupsOutput{}, nil
	}
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: []ec2types.SecurityGroup{{VpcId: awssdk.String("vpc-1")}}}, nil
}

func (f *fakeCloud) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	f.calls++
	arch := map[string]ec2types.ArchitectureValues{"ami-x86": ec2types.ArchitectureValuesX8664, "ami-arm": ec2types.ArchitectureValuesArm64}[in.ImageIds[0]]
	if arch == "" {
		return nil, &smithy.GenericAPIError{Code: "InvalidAMIID.NotFound", Message: "no"}
	}
	return &ec2.DescribeImagesOutput{Images: []ec2types.Image{{Architecture: arch}}}, nil
}

func (f *fakeCloud) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.calls++
	arch := ec2types.ArchitectureTypeX8664
	if strings.Contains(string(in.InstanceTypes[0]), "g.") {
		arch = ec2types.ArchitectureTypeArm64
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: []ec2types.InstanceTypeInfo{{ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}}}}}, nil
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		refs Refs
		want []string // substrings, one per problem; none = fine
	}{
		{"all fine", Refs{Cluster: "prod", Subnets: []string{"subnet-a"}, SecurityGroups: []string{"sg-a"}, Image: "ami-x86", InstanceTypes: []string{"m5.large"}}, nil},
		{"missing cluster", Refs{Cluster: "gone"}, []string{`clusterName "gone" is not an EKS cluster`}},
		{"cluster not active", Refs{Cluster: "new"}, []string{`clusterName "new" is CREATING, not ACTIVE`}},
		{"missing subnet and one of another VPC", Refs{Cluster: "prod", Subnets: []string{"subnet-z", "subnet-b"}},
			[]string{`subnets "subnet-z" is not a subnet`, `subnets "subnet-b" is a subnet of VPC vpc-2, not of the cluster's VPC vpc-1`}},
		{"missing security group", Refs{SecurityGroups: []string{"sg-z"}}, []string{`securityGroups "sg-z" is not a security group`}},
		{"missing image", Refs{Image: "ami-windows"}, []string{`image "ami-windows" is not an image`}},
		{"arm image on x86 instances", Refs{Image: "ami-arm", InstanceTypes: []string{"m5.large", "m6g.large"}}, []string{`image "ami-arm" is a arm64 image; instance type m5.large runs x86_64`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCloud{}
			chk := &Checker{AWS: &awsp.Clients{EC2: f, EKS: f}}
			c.refs.Field = "spec.eks.configuration"
			problems, err := chk.Check(context.Background(), c.refs)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(c.want) {
				t.Fatalf("problems %v, want %d: %v", problems, len(c.want), c.want)
			}
			for i, p := range problems {
				if !strings.Contains(p.String(), c.want[i]) || !strings.HasPrefix(p.String(), "spec.eks.configuration.") {
					t.Errorf("problem %q, want it to contain %q", p, c.want[i])
				}
			}
		})
	}
}

func TestOneCallPerDistinctReference(t *testing.T) {
	f := &fakeCloud{}
	chk := &Checker{AWS: &awsp.Clients{EC2: f, EKS: f}}
	for i := 0; i < 2000; i++ {
		if _, err := chk.Check(context.Background(), Refs{Cluster: "prod", Subnets: []string{"subnet-a"}, Image: "ami-windows"}); err != nil {
			t.Fatal(err)
		}
	}
	if f.calls != 3 {
		t.Fatalf("%d AWS calls for 2,000 checks of 3 distinct references, want 3", f.calls)
	}
}

// What a provisioner resolved through the shared cache is not read again
// by admission while young enough for it, and what admission found
// missing is read again by a provisioner (a tenant's fix is seen at once).
func TestSharesTheResolverCacheWithTheProvisioners(t *testing.T) {
	f := &fakeCloud{}
	refs := &resolve.Cache{}
	provisioner := resolve.Resolver{EC2: f, Cache: refs}
	if _, err := provisioner.SubnetIDs(context.Background(), []string{"subnet-a"}, "spec.eks.configuration.subnets", resolve.Fresh{Found: time.Hour}); err != nil {
		t.Fatal(err)
	}
	chk := &Checker{AWS: &awsp.Clients{EC2: f, EKS: f}, Refs: refs}
	if _, err := chk.Check(context.Background(), Refs{Subnets: []string{"subnet-a", "subnet-z"}}); err != nil {
		t.Fatal(err)
	}
	if f.calls != 2 {
		t.Fatalf("%d AWS calls, want 2: subnet-a by the provisioner, subnet-z by admission", f.calls)
	}
	if _, err := provisioner.SubnetIDs(context.Background(), []string{"subnet-z"}, "spec.eks.configuration.subnets", resolve.Fresh{Found: time.Hour}); err == nil {
		t.Fatal("subnet-z resolved")
	}
	if f.calls != 3 {
		t.Fatalf("%d AWS calls, want 3: a missing reference is read again by a provisioner", f.calls)
	}
}
