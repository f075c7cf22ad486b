package resolve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Resolver looks references up through its clients into Cache. The
// clients are the caller's own (admission's are charged to the requester,
// see webhooks.AWSBudget); the answers are shared through Cache.
type Resolver struct {
	EC2   awsp.EC2API // DescribeSubnets, DescribeSecurityGroups, DescribeImages
	SSM   awsp.SSMAPI // GetParameter
	Cache *Cache
}

// Network is a subnet or security group a reference names.
type Network struct {
	ID  string // subnet-... or sg-...
	VPC string // vpc-...
}

// Subnets returns the subnets ref names: the subnet with that id when ref
// starts with "subnet-", else those whose Name tag is ref, by id
// (EC2 DescribeSubnets, one call per distinct ref while fresh accepts
// it). None is an error wrapping ErrNotFound.
func (r Resolver) Subnets(ctx context.Context, ref string, fresh Fresh) ([]Network, error) {
	return r.network(ctx, subnets, ref, fresh)
}

// SecurityGroups returns the security groups ref names, as Subnets does
// ("sg-" ids; EC2 DescribeSecurityGroups).
func (r Resolver) SecurityGroups(ctx context.Context, ref string, fresh Fresh) ([]Network, error) {
	return r.network(ctx, securityGroups, ref, fresh)
}

// SubnetIDs turns subnet references into subnet ids, sorted and without
// duplicates (see Subnets; a Name tag naming several subnets stands for
// the first by id, as one reference always stood for one subnet). References that name no subnet are one
// *providers.SpecError on field (the spec path they came from, e.g.
// "spec.eks.configuration.subnets") listing them; a failed call is
// returned wrapped.
func (r Resolver) SubnetIDs(ctx context.Context, refs []string, field string, fresh Fresh) ([]string, error) {
	return r.ids(ctx, subnets, refs, field, fresh)
}

// SecurityGroupIDs turns security group references into ids, as
// SubnetIDs does.
func (r Resolver) SecurityGroupIDs(ctx context.Context, refs []string, field string, fresh Fresh) ([]string, error) {
	return r.ids(ctx, securityGroups, refs, field, fresh)
}

// networkKind is what differs between subnets and security groups.
type networkKind struct {
	name, key, idPrefix, idFilter string
	describe                      func(ctx context.Context, api awsp.EC2API, f ec2types.Filter) ([]Network, error)
}

var subnets = networkKind{name: "subnet", key: "subnet/", idPrefix: "subnet-", idFilter: "subnet-id",
	describe: func(ctx context.Context, api awsp.EC2API, f ec2types.Filter) ([]Network, error) {
		out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{f}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSubnets %s: %w", f.Values[0], err)
		}
		var nets []Network
		for _, s := range out.Subnets {
			nets = append(nets, Network{ID: awssdk.ToString(s.SubnetId), VPC: awssdk.ToString(s.VpcId)})
		}
		return nets, nil
	}}

var securityGroups = networkKind{name: "security group", key: "sg/", idPrefix: "sg-", idFilter: "group-id",
	describe: func(ctx context.Context, api awsp.EC2API, f ec2types.Filter) ([]Network, error) {
		out, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{f}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSecurityGroups %s: %w", f.Values[0], err)
		}
		var nets []Network
		for _, g := range out.SecurityGroups {
			nets = append(nets, Network{ID: awssdk.ToString(g.GroupId), VPC: awssdk.ToString(g.VpcId)})
		}
		return nets, nil
	}}

func (r Resolver) network(ctx context.Context, kind networkKind, ref string, fresh Fresh) ([]Network, error) {
	v, err := r.Cache.Do(ctx, kind.key+ref, fresh, func(ctx context.Context) (any, error) {
		f := ec2types.Filter{Name: awssdk.String("tag:Name"), Values: []string{ref}}
		if strings.HasPrefix(ref, kind.idPrefix) {
			f = ec2types.Filter{Name: awssdk.String(kind.idFilter), Values: []string{ref}}
		}
		nets, err := kind.describe(ctx, r.EC2, f)
		if err != nil {
			return nil, err
		}
		if len(nets) == 0 {
			return nil, fmt.Errorf("%s %s: %w", kind.name, ref, ErrNotFound)
		}
		sort.Slice(nets, func(i, j int) bool { return nets[i].ID < nets[j].ID })
		return nets, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]Network), nil
}

func (r Resolver) ids(ctx context.Context, kind networkKind, refs []string, field string, fresh Fresh) ([]string, error) {
	var out, missing []string
	seen := map[string]bool{}
	for _, ref := range refs {
		nets, err := r.network(ctx, kind, ref, fresh)
		if errors.Is(err, ErrNotFound) {
			missing = append(missing, ref)
			continue
		}
		if err != nil {
			return nil, err
		}
		if id := nets[0].ID; !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(missing) > 0 {
		return nil, &providers.SpecError{Field: field,
			Detail: fmt.Sprintf("no %s with id or Name tag %s", kind.name, strings.Join(missing, ", "))}
	}
	sort.Strings(out)
	return out, nil
}
