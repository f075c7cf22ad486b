package resolve

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/providers"
)

func TestNetworkIDs(t *testing.T) {
	cases := []struct {
		name    string
		groups  bool // security groups, not subnets
		refs    []string
		want    []string
		wantErr string // substring of a *providers.SpecError's message
	}{
		{name: "ids and Name tags, sorted, without duplicates", refs: []string{"private-b", "subnet-a", "private-a"}, want: []string{"subnet-a", "subnet-b"}},
		{name: "a Name tag on several subnets stands for one of them", refs: []string{"shared"}, want: []string{"subnet-c"}},
		{name: "none", refs: nil, want: nil},
		{name: "unknown references are named", refs: []string{"subnet-a", "subnet-z", "public"},
			wantErr: "spec.eks.configuration.subnets: no subnet with id or Name tag subnet-z, public"},
		{name: "security groups", groups: true, refs: []string{"nodes", "sg-a"}, want: []string{"sg-a"}},
		{name: "unknown security group", groups: true, refs: []string{"sg-z"},
			wantErr: "spec.eks.configuration.securityGroups: no security group with id or Name tag sg-z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeCloud()
			r := Resolver{EC2: f, Cache: &Cache{}}
			ids, err := r.SubnetIDs(context.Background(), c.refs, "spec.eks.configuration.subnets", Within(time.Minute))
			if c.groups {
				ids, err = r.SecurityGroupIDs(context.Background(), c.refs, "spec.eks.configuration.securityGroups", Within(time.Minute))
			}
			if c.wantErr != "" {
				var spec *providers.SpecError
				g.Expect(errors.As(err, &spec)).To(BeTrue(), "a *providers.SpecError, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(c.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ids).To(Equal(c.want))
		})
	}
}

func TestNetworkIDsFailedCallIsNotASpecError(t *testing.T) {
	g := NewWithT(t)
	f := newFakeCloud()
	f.fail = errors.New("RequestLimitExceeded")
	_, err := Resolver{EC2: f, Cache: &Cache{}}.SubnetIDs(context.Background(), []string{"subnet-a"}, "spec.eks.configuration.subnets", Within(time.Minute))
	var spec *providers.SpecError
	g.Expect(errors.As(err, &spec)).To(BeFalse())
	g.Expect(err).To(MatchError(ContainSubstring("ec2 DescribeSubnets subnet-a: RequestLimitExceeded")))
}

func TestSubnetsListEveryMatchWithItsVPC(t *testing.T) {
	g := NewWithT(t)
	nets, err := Resolver{EC2: newFakeCloud(), Cache: &Cache{}}.Subnets(context.Background(), "shared", Within(time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nets).To(ConsistOf(Network{ID: "subnet-c", VPC: "vpc-1"}, Network{ID: "subnet-d", VPC: "vpc-2"}))
}
