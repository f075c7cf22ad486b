package reads

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// countingSubnets answers DescribeSubnets with the subnets asked for by
// id, and counts the calls.
type countingSubnets struct {
	awsp.EC2API
	calls int
}

func (c *countingSubnets) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	c.calls++
	out := &ec2.DescribeSubnetsOutput{}
	for _, f := range in.Filters {
		for _, id := range f.Values {
			out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: awssdk.String(id)})
		}
	}
	return out, nil
}

func TestReadsTrustEntriesForTheirKeyAndPeriod(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := New(time.Hour)
	r.Now = func() time.Time { return now }

	r.Store("g1", "role", "k1", "arn-1")
	v, ok := r.Load("g1", "g1", "role", "k1")
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal("arn-1"))
	_, ok = r.Load("g1", "g1", "role", "k2")
	g.Expect(ok).To(BeFalse(), "another key: the inputs changed")
	_, ok = r.Load("g2", "g2", "role", "k1")
	g.Expect(ok).To(BeFalse(), "another group's")

	now = now.Add(10 * time.Minute)
	r.Done("g1", context.DeadlineExceeded)
	_, ok = r.Load("g1", "g1", "role", "k1")
	g.Expect(ok).To(BeFalse(), "a failing group reads again after 5 minutes")
	r.Done("g1", nil)
	_, ok = r.Load("g1", "g1", "role", "k1")
	g.Expect(ok).To(BeTrue(), "trusted for the cloud resync period again once it succeeds")

	r.Update("g1", "role", "k1", "arn-2")
	v, _ = r.Load("g1", "g1", "role", "k1")
	g.Expect(v).To(Equal("arn-2"))
	now = now.Add(50 * time.Minute)
	_, ok = r.Load("g1", "g1", "role", "k1")
	g.Expect(ok).To(BeFalse(), "an update does not make a read younger")

	r.Store("g1", "role", "k1", "arn-1")
	r.Store("g1", "template", "lt", struct{}{})
	r.Forget("g1")
	g.Expect(r.Len()).To(BeZero())
}

func TestReadsShareResolvedReferencesAcrossGroups(t *testing.T) {
	g := NewWithT(t)
	api := &countingSubnets{}
	r := New(time.Hour)
	ctx := context.Background()
	for _, group := range []string{"g1", "g2", "g3"} {
		ids, err := r.Subnets(ctx, api, types.UID(group), []string{"subnet-b", "subnet-a"}, "spec.eks.configuration.subnets")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ids).To(Equal([]string{"subnet-a", "subnet-b"}))
	}
	g.Expect(api.calls).To(Equal(1), "one read for three groups naming the same subnets")
	_, err := r.Subnets(ctx, api, "g1", []string{"subnet-c"}, "spec.eks.configuration.subnets")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls).To(Equal(2), "other references are read")
	_, err = r.Subnets(ctx, api, "g1", []string{"subnet-b", "subnet-a"}, "spec.eks.configuration.subnets")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.calls).To(Equal(2), "each set of references keeps its own entry")
}
