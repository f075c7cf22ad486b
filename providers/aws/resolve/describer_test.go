package resolve

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	. "github.com/onsi/gomega"
)

func TestImagesDescribeByIDFromTheCache(t *testing.T) {
	cases := []struct {
		name    string
		in      *ec2.DescribeImagesInput
		want    []ec2types.Image
		wantErr string
		calls   int
	}{
		{name: "owner and alias", in: &ec2.DescribeImagesInput{ImageIds: []string{"ami-arm"}}, calls: 1,
			want: []ec2types.Image{{ImageId: awssdk.String("ami-arm"), Architecture: "arm64", OwnerId: awssdk.String("602401143452"), ImageOwnerAlias: awssdk.String("amazon")}}},
		{name: "no alias", in: &ec2.DescribeImagesInput{ImageIds: []string{"ami-x86"}}, calls: 1,
			want: []ec2types.Image{{ImageId: awssdk.String("ami-x86"), Architecture: "x86_64", OwnerId: awssdk.String("111122223333")}}},
		{name: "missing", in: &ec2.DescribeImagesInput{ImageIds: []string{"ami-gone"}}, wantErr: "image ami-gone: does not exist", calls: 1},
		{name: "filters are not answered", in: &ec2.DescribeImagesInput{Owners: []string{"self"}}, wantErr: "by ImageIds only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeCloud()
			im := Images{Resolver: Resolver{EC2: f, Cache: &Cache{}}, Fresh: Within(time.Minute)}
			for range 3 {
				out, err := im.DescribeImages(context.Background(), c.in)
				if c.wantErr != "" {
					g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
					continue
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out.Images).To(Equal(c.want))
			}
			g.Expect(f.count("DescribeImages")).To(Equal(c.calls), "one call for three lookups")
		})
	}
}
