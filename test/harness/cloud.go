package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Cloud is what a cluster admin has in AWS before instance-manager runs: a
// VPC with two subnets and a security group, an EKS cluster, and AMIs.
type Cloud struct {
	// Cluster is the EKS cluster's name.
	Cluster       string
	Subnets       []string
	SecurityGroup string
	AMIs          []string // x86_64, sorted
}

// NewCloud creates the admin's resources for an EKS cluster called cluster
// in the AWS of cfg (moto), in a VPC with CIDR cidr (10.<n>.0.0/16).
func NewCloud(ctx context.Context, cfg aws.Config, cluster, cidr string) (*Cloud, error) {
	ec2c := ec2.NewFromConfig(cfg)
	f := &Cloud{Cluster: cluster}
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(cidr)})
	if err != nil {
		return nil, fmt.Errorf("CreateVpc: %w", err)
	}
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(strings.Replace(cidr, ".0.0/16", fmt.Sprintf(".%d.0/24", i), 1)), AvailabilityZone: aws.String(az)})
		if err != nil {
			return nil, fmt.Errorf("CreateSubnet: %w", err)
		}
		f.Subnets = append(f.Subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(cluster + "-nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId})
	if err != nil {
		return nil, fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	f.SecurityGroup = aws.ToString(sg.GroupId)
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: f.Subnets},
	}); err != nil {
		return nil, fmt.Errorf("CreateCluster: %w", err)
	}
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeImages: %w", err)
	}
	for _, im := range images.Images {
		f.AMIs = append(f.AMIs, aws.ToString(im.ImageId))
	}
	sort.Strings(f.AMIs)
	if len(f.AMIs) == 0 {
		return nil, errors.New("the emulator offers no x86_64 AMI")
	}
	return f, nil
}

// Boundaries is a boundary ConfigMap for the cloud: the cluster, image,
// subnets and security group are the admin's (restricted, from the
// defaults); rollingUpdate with maxUnavailable 1; tenants may annotate
// their groups for the cluster-autoscaler (enabled, priority).
func (f *Cloud) Boundaries() map[string]string {
	return map[string]string{
		"boundaries": `shared:
  merge:
  - spec.eks.configuration.labels
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
`, f.Cluster, f.AMIs[0], f.Subnets[0], f.Subnets[1], f.SecurityGroup),
		// Tenants may ask for the cluster-autoscaler's tags.
		"sharedAnnotations": "- " + v1alpha1.AnnotationClusterAutoscalerEnabled + "\n- " + v1alpha1.AnnotationClusterAutoscalerPriority + "\n",
	}
}
