package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Cloud is what a cluster admin has in AWS before instance-manager runs: a
// VPC with two subnets and a security group (each with a Name tag), an EKS
// cluster, and AMIs. Every suite that runs the manager against moto starts
// from one (NewCloud) and writes its boundaries (Boundaries).
type Cloud struct {
	// Cluster is the EKS cluster's name: "<prefix>-cluster".
	Cluster string
	// Subnets are the two subnets' ids (us-west-2a, us-west-2b);
	// SubnetNames their Name tags ("<prefix>-private-<i>").
	Subnets, SubnetNames []string
	// SecurityGroup is the nodes' security group id; SecurityGroupName its
	// group name and Name tag ("<prefix>-nodes").
	SecurityGroup, SecurityGroupName string
	// AMIs are moto's x86_64 images, sorted by id (at least 3).
	AMIs []string
}

// NewCloud creates the admin's resources in the AWS of cfg (moto): a VPC
// with CIDR cidr (10.<n>.0.0/16) and names that start with prefix. It
// returns the first AWS call's error, named.
func NewCloud(ctx context.Context, cfg aws.Config, prefix, cidr string) (*Cloud, error) {
	ec2c := ec2.NewFromConfig(cfg)
	f := &Cloud{Cluster: prefix + "-cluster", SecurityGroupName: prefix + "-nodes"}
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(cidr)})
	if err != nil {
		return nil, fmt.Errorf("CreateVpc: %w", err)
	}
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		name := fmt.Sprintf("%s-private-%d", prefix, i)
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(strings.Replace(cidr, ".0.0/16", fmt.Sprintf(".%d.0/24", i), 1)), AvailabilityZone: aws.String(az),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(name)}}}},
		})
		if err != nil {
			return nil, fmt.Errorf("CreateSubnet: %w", err)
		}
		f.Subnets = append(f.Subnets, aws.ToString(sn.Subnet.SubnetId))
		f.SubnetNames = append(f.SubnetNames, name)
	}
	sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(f.SecurityGroupName), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(f.SecurityGroupName)}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	f.SecurityGroup = aws.ToString(sg.GroupId)
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(f.Cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: f.Subnets},
	}); err != nil {
		return nil, fmt.Errorf("CreateCluster: %w", err)
	}
	// x86_64 images only: the suites' instance types (t3, c5) run nothing
	// else, and admission checks that an image fits its instance types.
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeImages: %w", err)
	}
	for _, im := range images.Images {
		f.AMIs = append(f.AMIs, aws.ToString(im.ImageId))
	}
	sort.Strings(f.AMIs)
	if len(f.AMIs) < 3 {
		return nil, fmt.Errorf("the emulator offers %d x86_64 AMIs; the suites need 3", len(f.AMIs))
	}
	return f, nil
}

// Boundaries is the admin's boundary ConfigMap data for the cloud, in the
// shape of examples/boundaries-configmap.yaml: the cluster, image, subnets
// (the first by Name tag, the second by id) and security group (by name)
// are the admin's; tenants merge labels, override tags and replace the
// strategy (rollingUpdate, maxUnavailable 1, by default); at most
// maxConcurrent groups rotate at once; tenants may annotate their groups
// for the cluster-autoscaler. The quota allows 100 groups a namespace (the
// suites' scale is above boundaries.DefaultQuotas, which their own tests
// cover); AWS's limits stay at their defaults.
func (f *Cloud) Boundaries(image string, maxConcurrent int) map[string]string {
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
      securityGroups: [%s]
      labels:
        a-default-label: "true"
      tags:
      - key: a-default-tag
        value: a-default-value
`, f.Cluster, image, f.SubnetNames[0], f.Subnets[1], f.SecurityGroupName),
		"rollout":           fmt.Sprintf("maxConcurrentUpgrades: %d\n", maxConcurrent),
		"quotas":            "perNamespace: {maxGroups: 100}\n",
		"sharedAnnotations": "- " + v1alpha1.AnnotationClusterAutoscalerEnabled + "\n- " + v1alpha1.AnnotationClusterAutoscalerPriority + "\n",
	}
}

// WithoutFirstSubnet returns boundaries (from Boundaries) whose default
// subnets leave out the first of the two: the admin removing a subnet from
// every group. t fails when boundaries do not list both.
func (f *Cloud) WithoutFirstSubnet(t testing.TB, boundaries map[string]string) map[string]string {
	t.Helper()
	after := map[string]string{}
	for k, v := range boundaries {
		after[k] = v
	}
	after["defaults"] = strings.Replace(boundaries["defaults"], fmt.Sprintf("subnets: [%s, %s]", f.SubnetNames[0], f.Subnets[1]),
		fmt.Sprintf("subnets: [%s]", f.Subnets[1]), 1)
	if after["defaults"] == boundaries["defaults"] {
		t.Fatalf("the boundaries' defaults do not list the cloud's two subnets: %s", boundaries["defaults"])
	}
	return after
}
