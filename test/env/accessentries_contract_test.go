package env_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/test/env"
)

// The emulator's EKS authentication modes and access entries
// (motoeksaccess.py) against the AWS documents each behaviour follows.
func TestAccessEntriesContract(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	ctx := t.Context()
	g := NewWithT(t)
	api, iamc := eks.NewFromConfig(e.AWS), iam.NewFromConfig(e.AWS)
	vpc, err := ec2.NewFromConfig(e.AWS).CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.9.0.0/16")})
	g.Expect(err).NotTo(HaveOccurred())
	sn, err := ec2.NewFromConfig(e.AWS).CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.9.0.0/24")})
	g.Expect(err).NotTo(HaveOccurred())
	cluster := func(name string, mode ekstypes.AuthenticationMode) {
		in := &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{*sn.Subnet.SubnetId}}}
		if mode != "" {
			in.AccessConfig = &ekstypes.CreateAccessConfigRequest{AuthenticationMode: mode}
		}
		_, err := api.CreateCluster(ctx, in)
		g.Expect(err).NotTo(HaveOccurred())
	}
	mode := func(name string) ekstypes.AuthenticationMode {
		out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Cluster.AccessConfig).NotTo(BeNil())
		return out.Cluster.AccessConfig.AuthenticationMode
	}
	role := func() string {
		out, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("nodes"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		return aws.ToString(out.Role.Arn)
	}
	entry := func(arn string) error {
		_, err := api.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn)})
		return err
	}

	t.Run("EKS API Reference, CreateAccessConfigRequest: the requested mode is kept; without one it is CONFIG_MAP", func(t *testing.T) {
		cluster("api", ekstypes.AuthenticationModeApi)
		cluster("default", "")
		g.Expect(mode("api")).To(Equal(ekstypes.AuthenticationModeApi))
		g.Expect(mode("default")).To(Equal(ekstypes.AuthenticationModeConfigMap))
	})

	arn := role()
	t.Run("EKS API Reference, CreateAccessEntry/DescribeAccessEntry/ListAccessEntries: created, described, listed; EC2_LINUX gets the node username", func(t *testing.T) {
		out, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX"),
			Tags: map[string]string{"k": "v"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(aws.ToString(out.AccessEntry.Username)).To(Equal("system:node:{{EC2PrivateDNSName}}"))
		got, err := api.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.AccessEntry.Tags).To(Equal(map[string]string{"k": "v"}))
		g.Expect(aws.ToString(got.AccessEntry.Type)).To(Equal("EC2_LINUX"))
		g.Expect(got.AccessEntry.CreatedAt).NotTo(BeNil())
		list, err := api.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("api")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.AccessEntries).To(Equal([]string{arn}))
		g.Expect(e.AccessEntryAuthenticates(ctx, "api", arn)).To(BeTrue())
	})

	t.Run("EKS API Reference, CreateAccessEntry: a second entry for the principal is ResourceInUseException", func(t *testing.T) {
		_, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX")})
		var inUse *ekstypes.ResourceInUseException
		g.Expect(errors.As(err, &inUse)).To(BeTrue(), "%v", err)
	})

	t.Run("EKS API Reference: a missing entry or cluster is ResourceNotFoundException", func(t *testing.T) {
		var nf *ekstypes.ResourceNotFoundException
		g.Expect(errors.As(entry("arn:aws:iam::123456789012:role/none"), &nf)).To(BeTrue())
		_, err := api.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String("arn:aws:iam::123456789012:role/none")})
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "%v", err)
		_, err = api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("missing"), PrincipalArn: aws.String(arn)})
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "%v", err)
	})

	t.Run("EKS API Reference, CreateAccessEntry: a principal that does not exist is InvalidParameterException", func(t *testing.T) {
		_, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String("arn:aws:iam::123456789012:role/none"), Type: aws.String("EC2_LINUX")})
		var invalid *ekstypes.InvalidParameterException
		g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
	})

	t.Run("EKS User Guide, Create access entries: a role deleted and created again under the same ARN keeps an entry that no longer authenticates", func(t *testing.T) {
		_, err := iamc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("nodes")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(role()).To(Equal(arn), "the same ARN")
		g.Expect(entry(arn)).To(Succeed(), "the entry stays")
		g.Expect(e.AccessEntryAuthenticates(ctx, "api", arn)).To(BeFalse(), "bound to the earlier role's id")
		_, err = api.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn)})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("api"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.AccessEntryAuthenticates(ctx, "api", arn)).To(BeTrue(), "an entry created again is bound to the role's new id")
	})
}
