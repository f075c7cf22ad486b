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
// id (but subnet-gone), and counts the calls.
type countingSubnets struct {
	awsp.EC2API
	calls int
}

func (c *countingSubnets) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	c.calls++
	out := &ec2.DescribeSubnetsOutput{}
	for _, f := range in.Filters {
		for _, id := range f.Values {
			if id != "subnet-gone" {
				out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: awssdk.String(id)})
			}
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

func TestReadsResolveReferencesAsFreshAsTheCallersPass(t *testing.T) {
	const field = "spec.eks.configuration.subnets"
	ctx := context.Background()
	type step struct {
		after  time.Duration // clock advance before the step
		group  string
		fails  bool // the group's last reconcile failed
		refs   []string
		calls  int // DescribeSubnets calls so far
		errHas string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"shared across groups, one read per reference", []step{
			{group: "g1", refs: []string{"subnet-b", "subnet-a"}, calls: 2},
			{group: "g2", refs: []string{"subnet-a", "subnet-b"}, calls: 2},
			{group: "g3", refs: []string{"subnet-a", "subnet-c"}, calls: 3},
		}},
		{"a Ready group trusts the answer for the cloud resync period", []step{
			{group: "g1", refs: []string{"subnet-a"}, calls: 1},
			{after: 50 * time.Minute, group: "g1", refs: []string{"subnet-a"}, calls: 1},
			{after: 11 * time.Minute, group: "g1", refs: []string{"subnet-a"}, calls: 2},
		}},
		{"a failing group reads again after the failing period", []step{
			{group: "g1", refs: []string{"subnet-a"}, calls: 1},
			{after: 6 * time.Minute, group: "g2", refs: []string{"subnet-a"}, calls: 1},
			{group: "g1", fails: true, refs: []string{"subnet-a"}, calls: 2},
		}},
		{"a missing reference is read on every pass", []step{
			{group: "g1", refs: []string{"subnet-a", "subnet-gone"}, calls: 2, errHas: field + ": no subnet with id or Name tag subnet-gone"},
			{group: "g1", refs: []string{"subnet-a", "subnet-gone"}, calls: 3, errHas: "subnet-gone"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			r := New(time.Hour)
			r.Now = func() time.Time { return now }
			api := &countingSubnets{}
			for i, s := range c.steps {
				now = now.Add(s.after)
				if s.fails {
					r.Done(types.UID(s.group), context.DeadlineExceeded)
				}
				ids, err := r.Subnets(ctx, api, types.UID(s.group), s.refs, field)
				if s.errHas != "" {
					g.Expect(err).To(MatchError(ContainSubstring(s.errHas)), "step %d", i)
				} else {
					g.Expect(err).NotTo(HaveOccurred(), "step %d", i)
					g.Expect(ids).To(HaveLen(len(s.refs)), "step %d", i)
				}
				g.Expect(api.calls).To(Equal(s.calls), "step %d: DescribeSubnets calls", i)
			}
		})
	}
}
