package aws

import (
	"fmt"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	. "github.com/onsi/gomega"
)

// testSSMContract checks that the test environment's SSM (moto with
// test/env/motossm.py) publishes the EKS-optimized AMI parameters as AWS
// does (Amazon EKS User Guide, "Retrieve recommended Amazon Linux AMI IDs",
// https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html):
// one per Kubernetes version, OS and architecture, each naming an image of
// that architecture; a control-plane upgrade changes it; the names are
// AWS's and PutParameter refuses them. moto alone answers
// ParameterNotFound.
func testSSMContract(t *testing.T, cfg awssdk.Config) {
	g := NewWithT(t)
	c := NewClients(cfg)
	get := func(name string) (string, error) {
		out, err := c.SSM.GetParameter(t.Context(), &ssm.GetParameterInput{Name: awssdk.String(name)})
		if err != nil {
			return "", err
		}
		return awssdk.ToString(out.Parameter.Value), nil
	}
	arch := func(image string) string {
		out, err := c.EC2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{image}})
		g.Expect(err).NotTo(HaveOccurred(), "the published image %s exists", image)
		g.Expect(out.Images).To(HaveLen(1))
		return string(out.Images[0].Architecture)
	}
	for _, tc := range []struct{ name, arch string }{
		{"/aws/service/eks/optimized-ami/%s/amazon-linux-2/recommended/image_id", string(ec2types.ArchitectureValuesX8664)},
		{"/aws/service/eks/optimized-ami/%s/amazon-linux-2-arm64/recommended/image_id", string(ec2types.ArchitectureValuesArm64)},
		{"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id", string(ec2types.ArchitectureValuesX8664)},
		{"/aws/service/eks/optimized-ami/%s/amazon-linux-2023/arm64/standard/recommended/image_id", string(ec2types.ArchitectureValuesArm64)},
	} {
		v30, err := get(fmt.Sprintf(tc.name, "1.30"))
		g.Expect(err).NotTo(HaveOccurred(), tc.name)
		g.Expect(arch(v30)).To(Equal(tc.arch), tc.name)
		v31, err := get(fmt.Sprintf(tc.name, "1.31"))
		g.Expect(err).NotTo(HaveOccurred(), tc.name)
		g.Expect(v31).NotTo(Equal(v30), "a newer Kubernetes version recommends another AMI: %s", tc.name)
		again, _ := get(fmt.Sprintf(tc.name, "1.30"))
		g.Expect(again).To(Equal(v30), "the published value is stable: %s", tc.name)
	}
	_, err := get("/aws/service/eks/optimized-ami/1.30/no-such-os/recommended/image_id")
	g.Expect(err).To(MatchError(ContainSubstring("ParameterNotFound")))
	_, err = ssm.NewFromConfig(cfg).PutParameter(t.Context(), &ssm.PutParameterInput{
		Name: awssdk.String("/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id"), Value: awssdk.String("ami-12345678"),
		Type: "String", Overwrite: awssdk.Bool(true)})
	g.Expect(err).To(HaveOccurred(), "AWS's parameter names are reserved")
}
