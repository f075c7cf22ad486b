package eks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/nodeargs"
)

// ENIMaxPods is the number of pods the VPC CNI can give an address to on
// an instance with enis network interfaces of ipv4PerENI IPv4 addresses
// each: every interface's primary address is the node's, not a pod's, and
// two host-network pods (aws-node, kube-proxy) need none. This is the
// formula of the EKS AMIs' eni-max-pods.txt (without prefix delegation).
func ENIMaxPods(enis, ipv4PerENI int32) int64 {
	return int64(enis)*(int64(ipv4PerENI)-1) + 2
}

// podCapacity reads instance types' network capacity (EC2
// DescribeInstanceTypes, one call per type, cached for ttl: instance type
// data changes rarely). Safe for concurrent use.
type podCapacity struct {
	api awsp.EC2API
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]capacityEntry
}

type capacityEntry struct {
	enis, ipv4 int32 // 0 when EC2 does not know the type
	at         time.Time
}

// of returns the type's network interfaces and IPv4 addresses per
// interface; ok is false for a type EC2 does not offer here or reports no
// network data for.
func (p *podCapacity) of(ctx context.Context, instanceType string) (enis, ipv4 int32, ok bool, err error) {
	p.mu.Lock()
	e, hit := p.cache[instanceType]
	p.mu.Unlock()
	if hit && p.now().Sub(e.at) < p.ttl {
		return e.enis, e.ipv4, e.enis > 0, nil
	}
	out, err := p.api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(instanceType)}})
	if err != nil && !isCode(err, "InvalidInstanceType") {
		return 0, 0, false, fmt.Errorf("ec2 DescribeInstanceTypes %s: %w", instanceType, err)
	}
	e = capacityEntry{at: p.now()}
	if err == nil && len(out.InstanceTypes) > 0 {
		if n := out.InstanceTypes[0].NetworkInfo; n != nil {
			e.enis, e.ipv4 = awssdk.ToInt32(n.MaximumNetworkInterfaces), awssdk.ToInt32(n.Ipv4AddressesPerInterface)
		}
	}
	p.mu.Lock()
	if p.cache == nil {
		p.cache = map[string]capacityEntry{}
	}
	p.cache[instanceType] = e
	p.mu.Unlock()
	return e.enis, e.ipv4, e.enis > 0, nil
}

// checkMaxPods refuses a kubelet max-pods above what the group's instance
// types can address (ENIMaxPods of each of types, the group's instance
// type and those of its mixed instances policy): the scheduler would
// place pods there that the VPC CNI cannot give an address, and they
// would stay ContainerCreating (issue 25, N8). It checks
// spec.eks.configuration.bootstrapOptions.maxPods and a --max-pods in
// bootstrapArguments' kubelet flags. A type EC2 does not know is left to
// the other checks. The error is a *providers.SpecError naming the field,
// the type and its bound.
func checkMaxPods(ctx context.Context, capacity *podCapacity, ig *v1alpha1.InstanceGroup, types []string) error {
	c := ig.Spec.EKS.Configuration
	type setting struct {
		field string
		value int64
	}
	var settings []setting
	if o := c.BootstrapOptions; o != nil && o.MaxPods > 0 {
		settings = append(settings, setting{"spec.eks.configuration.bootstrapOptions.maxPods", o.MaxPods})
	}
	if args, err := nodeargs.Parse(c.BootstrapArguments); err == nil {
		for _, f := range args.Kubelet {
			if v, ok := strings.CutPrefix(f, "--max-pods="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					settings = append(settings, setting{"spec.eks.configuration.bootstrapArguments", n})
				}
			}
		}
	}
	if len(settings) == 0 {
		return nil
	}
	for _, t := range types {
		enis, ipv4, ok, err := capacity.of(ctx, t)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		bound := ENIMaxPods(enis, ipv4)
		for _, s := range settings {
			if s.value > bound {
				return &providers.SpecError{Field: s.field, Detail: fmt.Sprintf("max pods %d is more than instance type %s can give addresses to: %d network interfaces × (%d IPv4 addresses − 1) + 2 = %d; set at most %d",
					s.value, t, enis, ipv4, bound, bound)}
			}
		}
	}
	return nil
}

// typeNames is the base instance type (when set) followed by the mixed
// instances policy's types, without repeats.
func typeNames(base string, mixed []v1alpha1.InstanceTypeSpec) []string {
	var out []string
	if base != "" {
		out = append(out, base)
	}
	for _, t := range mixed {
		if t.Type != "" && !slices.Contains(out, t.Type) {
			out = append(out, t.Type)
		}
	}
	return out
}
