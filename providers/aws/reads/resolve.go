package reads

import (
	"context"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// ResolveSubnets turns subnet references (ids "subnet-..." or values of
// the subnets' Name tag) into subnet ids, sorted and without duplicates
// (EC2 DescribeSubnets, one call for ids and one for names). References
// that match no subnet are a *providers.SpecError on field (the spec path
// the references came from, e.g. "spec.eks.configuration.subnets") listing
// them; a failed call is returned wrapped.
func ResolveSubnets(ctx context.Context, api awsp.EC2API, refs []string, field string) ([]string, error) {
	ids, names := split(refs, "subnet-")
	var found []ec2types.Subnet
	if len(ids) > 0 {
		out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: awssdk.String("subnet-id"), Values: ids}}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSubnets: %w", err)
		}
		found = append(found, out.Subnets...)
	}
	if len(names) > 0 {
		out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: awssdk.String("tag:Name"), Values: names}}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSubnets: %w", err)
		}
		found = append(found, out.Subnets...)
	}
	byRef := map[string]string{}
	for _, s := range found {
		id := awssdk.ToString(s.SubnetId)
		byRef[id] = id
		for _, t := range s.Tags {
			if awssdk.ToString(t.Key) == "Name" {
				byRef[awssdk.ToString(t.Value)] = id
			}
		}
	}
	return match(refs, byRef, field, "subnet")
}

// ResolveSecurityGroups turns security group references (ids "sg-..." or
// values of their Name tag) into ids, sorted and without duplicates (EC2
// DescribeSecurityGroups). Unknown references are a *providers.SpecError on
// field listing them; a failed call is returned wrapped.
func ResolveSecurityGroups(ctx context.Context, api awsp.EC2API, refs []string, field string) ([]string, error) {
	ids, names := split(refs, "sg-")
	var found []ec2types.SecurityGroup
	if len(ids) > 0 {
		out, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: awssdk.String("group-id"), Values: ids}}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSecurityGroups: %w", err)
		}
		found = append(found, out.SecurityGroups...)
	}
	if len(names) > 0 {
		out, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: awssdk.String("tag:Name"), Values: names}}})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeSecurityGroups: %w", err)
		}
		found = append(found, out.SecurityGroups...)
	}
	byRef := map[string]string{}
	for _, g := range found {
		id := awssdk.ToString(g.GroupId)
		byRef[id] = id
		for _, t := range g.Tags {
			if awssdk.ToString(t.Key) == "Name" {
				byRef[awssdk.ToString(t.Value)] = id
			}
		}
	}
	return match(refs, byRef, field, "security group")
}

func split(refs []string, idPrefix string) (ids, names []string) {
	for _, r := range refs {
		if strings.HasPrefix(r, idPrefix) {
			ids = append(ids, r)
		} else {
			names = append(names, r)
		}
	}
	return ids, names
}

func match(refs []string, byRef map[string]string, field, what string) ([]string, error) {
	var out, missing []string
	seen := map[string]bool{}
	for _, r := range refs {
		id, ok := byRef[r]
		if !ok {
			missing = append(missing, r)
			continue
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(missing) > 0 {
		return nil, &providers.SpecError{Field: field,
			Detail: fmt.Sprintf("no %s with id or Name tag %s", what, strings.Join(missing, ", "))}
	}
	sort.Strings(out)
	return out, nil
}
