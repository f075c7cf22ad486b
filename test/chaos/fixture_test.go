package chaos

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// fixture is what the cluster admin has in AWS before instance-manager
// runs: a VPC with two subnets and a security group (each with a Name tag),
// an EKS cluster, and AMIs.
type fixture struct {
	cluster       string
	subnets       []string // ids
	subnetNames   []string
	securityGroup string
	amis          []string
}

func newFixture(ctx context.Context, cfg aws.Config) (*fixture, error) {
	ec2c := ec2.NewFromConfig(cfg)
	f := &fixture{cluster: "chaos-cluster"}
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		return nil, fmt.Errorf("CreateVpc: %w", err)
	}
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		name := fmt.Sprintf("chaos-private-%d", i)
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(az),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(name)}}}},
		})
		if err != nil {
			return nil, fmt.Errorf("CreateSubnet: %w", err)
		}
		f.subnets = append(f.subnets, aws.ToString(sn.Subnet.SubnetId))
		f.subnetNames = append(f.subnetNames, name)
	}
	sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("chaos-nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("chaos-nodes")}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	f.securityGroup = aws.ToString(sg.GroupId)
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(f.cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: f.subnets},
	}); err != nil {
		return nil, fmt.Errorf("CreateCluster: %w", err)
	}
	// x86_64 images only: the suite's instance types (t3, c5) run nothing
	// else, and admission checks that an image fits its instance types.
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeImages: %w", err)
	}
	for _, im := range images.Images {
		f.amis = append(f.amis, aws.ToString(im.ImageId))
	}
	sort.Strings(f.amis)
	if len(f.amis) < 3 {
		return nil, fmt.Errorf("the emulator offers %d AMIs; the suite needs 3", len(f.amis))
	}
	return f, nil
}

// boundaries is the admin's boundary ConfigMap data for the fixture, in
// the shape of examples/boundaries-configmap.yaml.
func (f *fixture) boundaries(image string, maxConcurrent int) map[string]string {
	return map[string]string{
		"boundaries": `shared:
  merge:
  - spec.eks.configuration.labels
  mergeOverride:
  - spec.eks.configuration.tags
  replace:
  - spec.strategy
restricted:
- spec.eks.configuration.clusterName
- spec.eks.configuration.image
- spec.eks.configuration.subnets
- spec.eks.configuration.securityGroups
`,
		"defaults": fmt.Sprintf(`spec:
  provisioner: eks
  strategy:
    type: rollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  eks:
    configuration:
      clusterName: %s
      image: %s
      subnets: [%s, %s]
      securityGroups: [chaos-nodes]
      labels:
        a-default-label: "true"
      tags:
      - key: a-default-tag
        value: a-default-value
`, f.cluster, image, f.subnetNames[0], f.subnets[1]),
		"rollout": fmt.Sprintf("maxConcurrentUpgrades: %d\n", maxConcurrent),
		// The suite's scale (30 groups in one namespace, 50 tenants) is above the default
		// quotas (boundaries.DefaultQuotas, tested in boundaries and
		// test/integration); AWS's limits stay at their defaults.
		"quotas": "perNamespace: {maxGroups: 100}\n",
	}
}
