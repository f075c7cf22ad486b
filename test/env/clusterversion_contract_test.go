package env_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

// The emulator's control-plane version updates (motoeksversion.py)
// against the AWS documents each behaviour follows.
func TestClusterVersionUpdateContract(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	ctx := t.Context()
	g := NewWithT(t)
	api := eks.NewFromConfig(e.AWS)
	vpc, err := ec2.NewFromConfig(e.AWS).CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.8.0.0/16")})
	g.Expect(err).NotTo(HaveOccurred())
	sn, err := ec2.NewFromConfig(e.AWS).CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.8.0.0/24")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = api.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("c"), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{*sn.Subnet.SubnetId}}})
	g.Expect(err).NotTo(HaveOccurred())
	version := func() string {
		out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
		g.Expect(err).NotTo(HaveOccurred())
		return aws.ToString(out.Cluster.Version)
	}
	start := version()
	minor, err := strconv.Atoi(strings.TrimPrefix(start, "1."))
	g.Expect(err).NotTo(HaveOccurred(), "moto's cluster version %q", start)
	next := fmt.Sprintf("1.%d", minor+1)
	update := func(cluster, v string) (*eks.UpdateClusterVersionOutput, error) {
		return api.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(cluster), Version: aws.String(v)})
	}
	invalid := func(err error) bool {
		var ip *ekstypes.InvalidParameterException
		return errors.As(err, &ip)
	}

	t.Run("EKS User Guide, Update existing cluster: only the next minor version; not the same, not two ahead, not down", func(t *testing.T) {
		for _, v := range []string{start, fmt.Sprintf("1.%d", minor+2), fmt.Sprintf("1.%d", minor-1), "2.0"} {
			_, err := update("c", v)
			g.Expect(invalid(err)).To(BeTrue(), "UpdateClusterVersion %s -> %s: %v", start, v, err)
		}
		g.Expect(version()).To(Equal(start))
	})
	t.Run("EKS API Reference, UpdateClusterVersion: a VersionUpdate; DescribeCluster then answers the version", func(t *testing.T) {
		out, err := update("c", next)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Update.Type).To(Equal(ekstypes.UpdateTypeVersionUpdate))
		g.Expect(out.Update.Status).To(Equal(ekstypes.UpdateStatusInProgress))
		g.Expect(out.Update.Params).To(ContainElement(ekstypes.UpdateParam{Type: ekstypes.UpdateParamTypeVersion, Value: aws.String(next)}))
		g.Expect(version()).To(Equal(next))
	})
	t.Run("EKS User Guide, Retrieve recommended AMI IDs: the new version's parameter names another AMI", func(t *testing.T) {
		get := func(v string) string {
			out, err := ssm.NewFromConfig(e.AWS).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(v1alpha1.LatestImageParameter(v, "", ""))})
			g.Expect(err).NotTo(HaveOccurred())
			return aws.ToString(out.Parameter.Value)
		}
		g.Expect(get(next)).NotTo(Equal(get(start)))
	})
	t.Run("EKS API Reference, UpdateClusterVersion: a missing cluster is ResourceNotFoundException", func(t *testing.T) {
		_, err := update("nope", next)
		var nf *ekstypes.ResourceNotFoundException
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "%v", err)
	})
}
