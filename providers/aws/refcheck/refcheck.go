// Package refcheck checks that the cloud references of a spec exist before
// they reach any group: the EKS cluster (and that it is ACTIVE), subnets
// and security groups (and that they are in the cluster's VPC), the image
// (and that its architecture fits the instance types), and a named IAM role
// and instance profile. Answers are cached per distinct reference for a
// short TTL in the resolver the provisioners use too (providers/aws/resolve;
// keys "cluster/", "role/", "profile/", "itype/" are refcheck's own), and
// concurrent lookups of one reference share one call, so a
// boundary change seen by 2,000 groups costs one call per distinct
// reference, not per group.
package refcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
)

// Refs are the cloud references of one spec (empty fields are not checked).
type Refs struct {
	// Field is the spec path the references sit under, for messages
	// (e.g. "spec.eks.configuration").
	Field          string
	Cluster        string
	Subnets        []string // ids or Name tag values
	SecurityGroups []string // ids or Name tag values
	Image          string   // only "ami-..." ids are checked
	InstanceTypes  []string
	Role           string // IAM role name
	Profile        string // IAM instance profile name
}

// Problem is one reference that does not work.
type Problem struct {
	Field  string // e.g. spec.eks.configuration.image
	Ref    string // the value
	Detail string // what is wrong
}

func (p Problem) String() string { return fmt.Sprintf("%s %q %s", p.Field, p.Ref, p.Detail) }

// Checker checks references through the AWS clients and the shared
// resolver (resolve.Cache), accepting answers younger than TTL (default 1
// minute), a missing reference's included. Safe for concurrent use.
type Checker struct {
	AWS *awsp.Clients
	TTL time.Duration
	// Refs is the cache of answers, shared with the provisioners
	// (eks.Options.References); nil: one of the Checker's own.
	Refs *resolve.Cache

	once sync.Once
}

// lookup returns the answer for key through the cache (see
// resolve.Cache.Do), as fresh as TTL.
func (c *Checker) lookup(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	return c.cache().Do(ctx, key, c.fresh(), fn)
}

func (c *Checker) cache() *resolve.Cache {
	c.once.Do(func() {
		if c.Refs == nil {
			c.Refs = &resolve.Cache{}
		}
	})
	return c.Refs
}

func (c *Checker) fresh() resolve.Fresh {
	if c.TTL <= 0 {
		return resolve.Within(time.Minute)
	}
	return resolve.Within(c.TTL)
}

func (c *Checker) resolver() resolve.Resolver {
	return resolve.Resolver{EC2: c.AWS.EC2, SSM: c.AWS.SSM, Cache: c.cache()}
}

type clusterInfo struct{ status, vpc string }

// Check returns the problems of refs, in a stable order. An AWS failure
// other than "not found" is returned as an error (the caller refuses with
// "could not check", never accepts unchecked).
func (c *Checker) Check(ctx context.Context, refs Refs) ([]Problem, error) {
	var out []Problem
	add := func(field, ref, detail string) {
		out = append(out, Problem{Field: refs.Field + "." + field, Ref: ref, Detail: detail})
	}
	vpc := ""
	if refs.Cluster != "" {
		v, err := c.lookup(ctx, "cluster/"+refs.Cluster, func(ctx context.Context) (any, error) {
			got, err := c.AWS.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(refs.Cluster)})
			var nf *ekstypes.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, resolve.ErrNotFound
			}
			if err != nil {
				return nil, fmt.Errorf("eks DescribeCluster %s: %w", refs.Cluster, err)
			}
			info := clusterInfo{status: string(got.Cluster.Status)}
			if got.Cluster.ResourcesVpcConfig != nil {
				info.vpc = awssdk.ToString(got.Cluster.ResourcesVpcConfig.VpcId)
			}
			return info, nil
		})
		switch {
		case errors.Is(err, resolve.ErrNotFound):
			add("clusterName", refs.Cluster, "is not an EKS cluster in this account and region")
		case err != nil:
			return nil, err
		default:
			info := v.(clusterInfo)
			if info.status != string(ekstypes.ClusterStatusActive) {
				add("clusterName", refs.Cluster, fmt.Sprintf("is %s, not ACTIVE", info.status))
			}
			vpc = info.vpc
		}
	}
	for _, ref := range refs.Subnets {
		if err := c.network(ctx, "subnet", ref, vpc, add, "subnets"); err != nil {
			return nil, err
		}
	}
	for _, ref := range refs.SecurityGroups {
		if err := c.network(ctx, "security group", ref, vpc, add, "securityGroups"); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(refs.Image, "ami-") {
		im, err := c.resolver().Image(ctx, refs.Image, c.fresh())
		switch {
		case errors.Is(err, resolve.ErrNotFound):
			add("image", refs.Image, "is not an image this account can launch in this region")
		case err != nil:
			return nil, err
		default:
			if err := c.architectures(ctx, refs, im.Architecture, add); err != nil {
				return nil, err
			}
		}
	}
	if refs.Role != "" {
		_, err := c.lookup(ctx, "role/"+refs.Role, func(ctx context.Context) (any, error) {
			_, err := c.AWS.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(refs.Role)})
			return nil, iamErr(err, "GetRole", refs.Role)
		})
		if errors.Is(err, resolve.ErrNotFound) {
			add("roleName", refs.Role, "is not an IAM role")
		} else if err != nil {
			return nil, err
		}
	}
	if refs.Profile != "" {
		_, err := c.lookup(ctx, "profile/"+refs.Profile, func(ctx context.Context) (any, error) {
			_, err := c.AWS.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(refs.Profile)})
			return nil, iamErr(err, "GetInstanceProfile", refs.Profile)
		})
		if errors.Is(err, resolve.ErrNotFound) {
			add("instanceProfileName", refs.Profile, "is not an IAM instance profile")
		} else if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// network checks a subnet or security group reference (an id, or a Name
// tag value) exists, and is in vpc when vpc is known (see
// resolve.Resolver.Subnets and SecurityGroups).
func (c *Checker) network(ctx context.Context, kind, ref, vpc string, add func(field, ref, detail string), field string) error {
	find := c.resolver().Subnets
	if kind == "security group" {
		find = c.resolver().SecurityGroups
	}
	nets, err := find(ctx, ref, c.fresh())
	if errors.Is(err, resolve.ErrNotFound) {
		add(field, ref, fmt.Sprintf("is not a %s (id or Name tag) in this account and region", kind))
		return nil
	}
	if err != nil {
		return err
	}
	var vpcs []string
	for _, n := range nets {
		vpcs = append(vpcs, n.VPC)
	}
	if vpc != "" && !slices.Contains(vpcs, vpc) {
		add(field, ref, fmt.Sprintf("is a %s of VPC %s, not of the cluster's VPC %s", kind, strings.Join(vpcs, ", "), vpc))
	}
	return nil
}

// architectures checks every instance type runs images of arch (EC2
// DescribeInstanceTypes, one call per distinct type, cached).
func (c *Checker) architectures(ctx context.Context, refs Refs, arch string, add func(field, ref, detail string)) error {
	if arch == "" {
		return nil
	}
	for _, t := range refs.InstanceTypes {
		v, err := c.lookup(ctx, "itype/"+t, func(ctx context.Context) (any, error) {
			got, err := c.AWS.EC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(t)}})
			if awsp.HasErrorCode(err, "InvalidInstanceType") || err == nil && len(got.InstanceTypes) == 0 {
				return nil, resolve.ErrNotFound
			}
			if err != nil {
				return nil, fmt.Errorf("ec2 DescribeInstanceTypes %s: %w", t, err)
			}
			var archs []string
			if p := got.InstanceTypes[0].ProcessorInfo; p != nil {
				for _, a := range p.SupportedArchitectures {
					archs = append(archs, string(a))
				}
			}
			return archs, nil
		})
		switch {
		case errors.Is(err, resolve.ErrNotFound):
			add("instanceType", t, "is not an EC2 instance type offered in this region")
		case err != nil:
			return err
		case len(v.([]string)) > 0 && !slices.Contains(v.([]string), arch):
			add("image", refs.Image, fmt.Sprintf("is a %s image; instance type %s runs %s", arch, t, strings.Join(v.([]string), ", ")))
		}
	}
	return nil
}

func iamErr(err error, op, name string) error {
	var nse *iamtypes.NoSuchEntityException
	if errors.As(err, &nse) {
		return resolve.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("iam %s %s: %w", op, name, err)
	}
	return nil
}
