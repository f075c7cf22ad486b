package install

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"sigs.k8s.io/yaml"
)

// Cloud is what the cluster admin has in AWS before instance-manager is
// installed, created in moto with the names of the example boundary
// ConfigMap: its EKS cluster, node IAM role and instance profile and key
// pair keep their example names; its subnets, security group and AMIs get
// ids from moto, which Boundaries writes into the example in place of the
// example's made-up ids.
type Cloud struct {
	// Cluster is the EKS cluster's name (the example's clusterName).
	Cluster string
	// VPC is the id of the VPC holding the subnets and security group.
	VPC string
	// Subnets are subnet ids, one per example subnet, in us-west-2a, -2b, ...
	Subnets []string
	// SubnetZones are the availability zones of Subnets.
	SubnetZones []string
	// SecurityGroups are security group ids, one per example security group.
	SecurityGroups []string
	// Role and InstanceProfile are the nodes' IAM role and instance profile
	// (the example's roleName and instanceProfileName); KeyPair the EC2 key
	// pair (keyPairName).
	Role, InstanceProfile, KeyPair string
	// AMIs are three x86_64 images from moto's catalogue, sorted by id:
	// the nodes' image, the one an admin upgrades to, and a third (the
	// demo's broken image).
	AMIs []string
	// AMINames are the images' names, by id.
	AMINames map[string]string

	cfg     aws.Config
	example exampleIDs
}

// exampleIDs are the made-up AWS ids and names in the example defaults.
type exampleIDs struct {
	cluster, role, profile, keyPair, image string
	subnets, securityGroups                []string
}

// readExampleIDs reads the ids and names from the example ConfigMap's
// defaults (spec.eks.configuration). Errors: the example lacks one.
func readExampleIDs() (exampleIDs, error) {
	cm, err := ExampleBoundaries()
	if err != nil {
		return exampleIDs{}, err
	}
	var d struct {
		Spec struct {
			EKS struct {
				Configuration struct {
					ClusterName         string   `json:"clusterName"`
					Image               string   `json:"image"`
					Subnets             []string `json:"subnets"`
					SecurityGroups      []string `json:"securityGroups"`
					RoleName            string   `json:"roleName"`
					InstanceProfileName string   `json:"instanceProfileName"`
					KeyPairName         string   `json:"keyPairName"`
				} `json:"configuration"`
			} `json:"eks"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["defaults"]), &d); err != nil {
		return exampleIDs{}, fmt.Errorf("example boundary ConfigMap defaults: %w", err)
	}
	c := d.Spec.EKS.Configuration
	ids := exampleIDs{cluster: c.ClusterName, role: c.RoleName, profile: c.InstanceProfileName, keyPair: c.KeyPairName,
		image: c.Image, subnets: c.Subnets, securityGroups: c.SecurityGroups}
	if ids.cluster == "" || ids.image == "" || len(ids.subnets) == 0 || len(ids.securityGroups) == 0 {
		return exampleIDs{}, fmt.Errorf("example boundary ConfigMap defaults lack clusterName, image, subnets or securityGroups: %+v", ids)
	}
	return ids, nil
}

// NewCloud creates the admin's AWS resources in the AWS endpoint cfg
// points at (moto): a VPC with one subnet per example subnet (Name tags
// <cluster>-private-<n>), the security groups (Name tags
// <cluster>-nodes-<n>), the EKS cluster, the IAM role with its instance
// profile, and the key pair; and it picks three AMIs. Errors: an AWS call
// failing (named) or fewer than two x86_64 AMIs on offer.
func NewCloud(ctx context.Context, cfg aws.Config) (*Cloud, error) {
	ids, err := readExampleIDs()
	if err != nil {
		return nil, err
	}
	c := &Cloud{Cluster: ids.cluster, Role: ids.role, InstanceProfile: ids.profile, KeyPair: ids.keyPair,
		AMINames: map[string]string{}, cfg: cfg, example: ids}
	ec2c := ec2.NewFromConfig(cfg)
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		return nil, fmt.Errorf("ec2 CreateVpc: %w", err)
	}
	c.VPC = aws.ToString(vpc.Vpc.VpcId)
	zones := []string{"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}
	for i := range ids.subnets {
		zone := zones[i%len(zones)]
		name := fmt.Sprintf("%s-private-%d", c.Cluster, i)
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(zone),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: nameTag(name)}},
		})
		if err != nil {
			return nil, fmt.Errorf("ec2 CreateSubnet %s: %w", name, err)
		}
		c.Subnets = append(c.Subnets, aws.ToString(sn.Subnet.SubnetId))
		c.SubnetZones = append(c.SubnetZones, zone)
	}
	for i := range ids.securityGroups {
		name := fmt.Sprintf("%s-nodes-%d", c.Cluster, i)
		sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: aws.String(name), Description: aws.String("nodes of " + c.Cluster), VpcId: vpc.Vpc.VpcId,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: nameTag(name)}},
		})
		if err != nil {
			return nil, fmt.Errorf("ec2 CreateSecurityGroup %s: %w", name, err)
		}
		c.SecurityGroups = append(c.SecurityGroups, aws.ToString(sg.GroupId))
	}
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(c.Cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: c.Subnets, SecurityGroupIds: c.SecurityGroups},
	}); err != nil {
		return nil, fmt.Errorf("eks CreateCluster %s: %w", c.Cluster, err)
	}
	iamc := iam.NewFromConfig(cfg)
	if c.Role != "" {
		if _, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(c.Role),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["ec2.amazonaws.com"]},"Action":["sts:AssumeRole"]}]}`)}); err != nil {
			return nil, fmt.Errorf("iam CreateRole %s: %w", c.Role, err)
		}
	}
	if c.InstanceProfile != "" {
		if _, err := iamc.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(c.InstanceProfile)}); err != nil {
			return nil, fmt.Errorf("iam CreateInstanceProfile %s: %w", c.InstanceProfile, err)
		}
		if c.Role != "" {
			if _, err := iamc.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
				InstanceProfileName: aws.String(c.InstanceProfile), RoleName: aws.String(c.Role)}); err != nil {
				return nil, fmt.Errorf("iam AddRoleToInstanceProfile %s %s: %w", c.InstanceProfile, c.Role, err)
			}
		}
	}
	if c.KeyPair != "" {
		if _, err := ec2c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String(c.KeyPair)}); err != nil {
			return nil, fmt.Errorf("ec2 CreateKeyPair %s: %w", c.KeyPair, err)
		}
	}
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return nil, fmt.Errorf("ec2 DescribeImages: %w", err)
	}
	sort.Slice(images.Images, func(i, j int) bool {
		return aws.ToString(images.Images[i].ImageId) < aws.ToString(images.Images[j].ImageId)
	})
	for _, im := range images.Images {
		if len(c.AMIs) == 3 {
			break
		}
		id := aws.ToString(im.ImageId)
		c.AMIs = append(c.AMIs, id)
		c.AMINames[id] = aws.ToString(im.Name)
	}
	if len(c.AMIs) < 3 {
		return nil, fmt.Errorf("moto offers %d x86_64 AMIs; 3 are needed", len(c.AMIs))
	}
	return c, nil
}

func nameTag(name string) []ec2types.Tag {
	return []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(name)}}
}

// Boundaries returns the data of the example boundary ConfigMap
// (boundaries-configmap.yaml) with the example's made-up subnet, security
// group and image ids replaced by the Cloud's (image: the AMI to use) and
// nothing else changed. Errors: the example does not parse, or an id to
// replace is not found in it.
func (c *Cloud) Boundaries(image string) (map[string]string, error) {
	cm, err := ExampleBoundaries()
	if err != nil {
		return nil, err
	}
	replace := map[string]string{c.example.image: image}
	for i, id := range c.example.subnets {
		replace[id] = c.Subnets[i]
	}
	for i, id := range c.example.securityGroups {
		replace[id] = c.SecurityGroups[i]
	}
	defaults := cm.Data["defaults"]
	for from, to := range replace {
		re := regexp.MustCompile(`(^|[^A-Za-z0-9-])` + regexp.QuoteMeta(from) + `($|[^A-Za-z0-9-])`)
		if !re.MatchString(defaults) {
			return nil, fmt.Errorf("the example boundary ConfigMap's defaults do not contain %q", from)
		}
		defaults = re.ReplaceAllString(defaults, "${1}"+to+"${2}")
	}
	data := map[string]string{}
	for k, v := range cm.Data {
		data[k] = v
	}
	data["defaults"] = defaults
	return data, nil
}

// Inventory is what moto holds of the resources instance-manager creates
// for InstanceGroups.
type Inventory struct {
	// AutoScalingGroups and LaunchTemplates are names.
	AutoScalingGroups, LaunchTemplates []string
	// LiveInstances are ids of instances not terminated; Terminated counts
	// the terminated ones (moto lists them for a while, as AWS does).
	LiveInstances []string
	Terminated    int
	// Roles and InstanceProfiles are IAM names other than the admin's
	// (Cloud.Role and Cloud.InstanceProfile).
	Roles, InstanceProfiles []string
}

// Leftovers describes, sorted, every resource of the inventory; empty
// means nothing is left.
func (inv Inventory) Leftovers() []string {
	var out []string
	add := func(kind string, names []string) {
		for _, n := range names {
			out = append(out, kind+" "+n)
		}
	}
	add("Auto Scaling group", inv.AutoScalingGroups)
	add("launch template", inv.LaunchTemplates)
	add("instance", inv.LiveInstances)
	add("IAM role", inv.Roles)
	add("IAM instance profile", inv.InstanceProfiles)
	sort.Strings(out)
	return out
}

// Inventory lists what moto holds of the kinds instance-manager creates:
// every Auto Scaling group, launch template and instance, and the IAM roles
// and instance profiles other than the admin's. Errors: an AWS call failing
// (named).
func (c *Cloud) Inventory(ctx context.Context) (Inventory, error) {
	var inv Inventory
	groups, err := autoscaling.NewFromConfig(c.cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil {
		return inv, fmt.Errorf("autoscaling DescribeAutoScalingGroups: %w", err)
	}
	for _, g := range groups.AutoScalingGroups {
		inv.AutoScalingGroups = append(inv.AutoScalingGroups, aws.ToString(g.AutoScalingGroupName))
	}
	ec2c := ec2.NewFromConfig(c.cfg)
	lts, err := ec2c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		return inv, fmt.Errorf("ec2 DescribeLaunchTemplates: %w", err)
	}
	for _, lt := range lts.LaunchTemplates {
		inv.LaunchTemplates = append(inv.LaunchTemplates, aws.ToString(lt.LaunchTemplateName))
	}
	instances, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		return inv, fmt.Errorf("ec2 DescribeInstances: %w", err)
	}
	for _, r := range instances.Reservations {
		for _, in := range r.Instances {
			if in.State != nil && in.State.Name == ec2types.InstanceStateNameTerminated {
				inv.Terminated++
				continue
			}
			inv.LiveInstances = append(inv.LiveInstances, aws.ToString(in.InstanceId))
		}
	}
	iamc := iam.NewFromConfig(c.cfg)
	roles, err := iamc.ListRoles(ctx, &iam.ListRolesInput{})
	if err != nil {
		return inv, fmt.Errorf("iam ListRoles: %w", err)
	}
	for _, r := range roles.Roles {
		if name := aws.ToString(r.RoleName); name != c.Role {
			inv.Roles = append(inv.Roles, name)
		}
	}
	profiles, err := iamc.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil {
		return inv, fmt.Errorf("iam ListInstanceProfiles: %w", err)
	}
	for _, p := range profiles.InstanceProfiles {
		if name := aws.ToString(p.InstanceProfileName); name != c.InstanceProfile {
			inv.InstanceProfiles = append(inv.InstanceProfiles, name)
		}
	}
	for _, s := range [][]string{inv.AutoScalingGroups, inv.LaunchTemplates, inv.LiveInstances, inv.Roles, inv.InstanceProfiles} {
		slices.Sort(s)
	}
	return inv, nil
}

// Describe is a one-line account of the Cloud for people.
func (c *Cloud) Describe() string {
	var subnets []string
	for i, s := range c.Subnets {
		subnets = append(subnets, s+" ("+c.SubnetZones[i]+")")
	}
	return fmt.Sprintf("EKS cluster %s; VPC %s; subnets %s; security group %s; IAM role %s with instance profile %s; key pair %s",
		c.Cluster, c.VPC, strings.Join(subnets, ", "), strings.Join(c.SecurityGroups, ", "), c.Role, c.InstanceProfile, c.KeyPair)
}
