// Package eks is the eks provisioner: an InstanceGroup becomes an IAM role
// and instance profile, a launch template (one version per change), an
// Auto Scaling group, and node access (aws-auth or an EKS access entry), so
// its instances join the EKS cluster as nodes.
package eks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Options tune the provisioner.
type Options struct {
	// GroupCacheTTL is how long one listing of a cluster's Auto Scaling
	// groups serves every group (our own writes invalidate it). Default 30s.
	GroupCacheTTL time.Duration
	// ImageRecheck is how often "latest" and "ssm://" images are re-read
	// from SSM. Default 10m.
	ImageRecheck time.Duration
	// KeepVersions is how many launch template versions are kept. Default 3.
	KeepVersions int
}

// Provisioner implements providers.Provisioner and providers.Rotator for
// provisioner "eks" (and its deprecated alias "eks-cf").
type Provisioner struct {
	aws    *awsp.Clients
	access nodeAccess
	opts   Options

	clusters  *clusters
	images    *images
	launched  *launchedVersions
	templates ownedTemplates

	mu     sync.Mutex
	groups map[string]*awsp.ScalingGroupCache // by cluster name
}

var (
	_ providers.Provisioner = (*Provisioner)(nil)
	_ providers.Rotator     = (*Provisioner)(nil)
)

// New returns the eks provisioner using the AWS clients and a Kubernetes
// client (for the aws-auth ConfigMap and InstanceGroups sharing a role).
func New(clients *awsp.Clients, kube client.Client, opts Options) *Provisioner {
	if opts.GroupCacheTTL <= 0 {
		opts.GroupCacheTTL = 30 * time.Second
	}
	if opts.ImageRecheck <= 0 {
		opts.ImageRecheck = 10 * time.Minute
	}
	if opts.KeepVersions <= 0 {
		opts.KeepVersions = 3
	}
	return &Provisioner{
		aws: clients, access: nodeAccess{kube: kube, eks: clients.EKS}, opts: opts,
		clusters: &clusters{api: clients.EKS, ttl: 10 * time.Minute, now: time.Now},
		images:   &images{api: clients.SSM, ttl: opts.ImageRecheck, now: time.Now},
		launched: &launchedVersions{api: clients.EC2},
		groups:   map[string]*awsp.ScalingGroupCache{},
	}
}

func (p *Provisioner) groupCache(cluster string) *awsp.ScalingGroupCache {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.groups[cluster]
	if !ok {
		c = awsp.NewScalingGroupCache(p.aws.AutoScaling, cluster, p.opts.GroupCacheTTL)
		p.groups[cluster] = c
	}
	return c
}

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKS == nil || ig.Spec.EKS.Configuration == nil {
		return &providers.SpecError{Field: "spec.eks.configuration", Detail: "required by the eks provisioner"}
	}
	return nil
}

// Apply converges the group's IAM role, launch template, Auto Scaling group
// and node access to ig.Spec and observes the group. See
// providers.Provisioner.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	spec := ig.Spec.EKS
	c := spec.Configuration
	cluster, err := p.clusters.get(ctx, c.ClusterName)
	if err != nil {
		return nil, err
	}
	subnets, err := ResolveSubnets(ctx, p.aws.EC2, c.Subnets, "spec.eks.configuration.subnets")
	if err != nil {
		return nil, err
	}
	sgs, err := ResolveSecurityGroups(ctx, p.aws.EC2, c.SecurityGroups, "spec.eks.configuration.securityGroups")
	if err != nil {
		return nil, err
	}
	roleARN, profile, err := ensureRole(ctx, p.aws.IAM, ig)
	if err != nil {
		return nil, err
	}
	name := groupName(ig)
	tmpl, err := describeTemplate(ctx, p.aws.EC2, name)
	if err != nil {
		return nil, err
	}
	if err := p.templates.check(ctx, p.aws.EC2, ig, name, tmpl); err != nil {
		return nil, err
	}
	image, err := p.images.resolve(ctx, ig, cluster.Version)
	if err != nil {
		return nil, err
	}
	if ig.Annotations[v1alpha1.AnnotationLockUpgrades] == "true" && c.Image != image && tmpl.latestImageID != "" {
		image = tmpl.latestImageID // a newly published AMI is not drift while locked
	}
	b := groupBootstrap(ig, cluster)
	if err := b.Validate(); err != nil {
		return nil, err
	}
	ud := b.UserData()
	data := launchTemplateData(ig, launchInput{imageID: image, profileName: profile, securityGroups: sgs, userData: ud})
	version, err := ensureLaunchTemplate(ctx, p.aws.EC2, ig, name, tmpl, data)
	if err != nil {
		return nil, err
	}

	cache := p.groupCache(c.ClusterName)
	current, _, err := cache.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if current != nil {
		if err := ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(current.Tags)); err != nil {
			return nil, err
		}
	}
	g := groupSpec{name: name, template: name, version: version, subnets: subnets, min: int32(spec.MinSize), max: int32(spec.MaxSize)}
	wrote, err := ensureScalingGroup(ctx, p.aws.AutoScaling, ig, g, current)
	if err != nil {
		return nil, err
	}
	if wrote {
		cache.Invalidate()
		if current, _, err = cache.Get(ctx, name); err != nil {
			return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
		}
	}
	if current == nil {
		return nil, fmt.Errorf("Auto Scaling group %s was created but is not listed yet", name)
	}
	if wrote, err := ensureGroupFeatures(ctx, p.aws.AutoScaling, ig, current); err != nil {
		return nil, err
	} else if wrote {
		cache.Invalidate()
	}
	if err := p.access.grant(ctx, ig, cluster, roleARN); err != nil {
		return nil, err
	}

	obs := &providers.Observation{
		GroupName: name, LaunchTemplateName: name, LatestTemplateVersion: strconv.FormatInt(version, 10), RoleARN: roleARN,
		Min: int(awssdk.ToInt32(current.MinSize)), Max: int(awssdk.ToInt32(current.MaxSize)), Desired: int(awssdk.ToInt32(current.DesiredCapacity)),
		Lifecycle: lifecycleOf(ig),
	}
	ids := make([]string, 0, len(current.Instances))
	for _, in := range current.Instances {
		ids = append(ids, awssdk.ToString(in.InstanceId))
	}
	launched, err := p.launched.lookup(ctx, ids)
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{obs.LatestTemplateVersion: true}
	dnsNames := p.launched.dnsNames(ids)
	for _, in := range current.Instances {
		v, ok := launched[awssdk.ToString(in.InstanceId)]
		if !ok && in.LaunchTemplate != nil {
			v = awssdk.ToString(in.LaunchTemplate.Version)
		}
		inUse[v] = true
		obs.Instances = append(obs.Instances, providers.Instance{
			ID:             awssdk.ToString(in.InstanceId),
			ProviderID:     fmt.Sprintf("aws:///%s/%s", awssdk.ToString(in.AvailabilityZone), awssdk.ToString(in.InstanceId)),
			LifecycleState: string(in.LifecycleState),
			Healthy:        awssdk.ToString(in.HealthStatus) == "Healthy",
			UpToDate:       v == obs.LatestTemplateVersion,
			PrivateDNSName: dnsNames[awssdk.ToString(in.InstanceId)],
		})
	}
	if version > int64(p.opts.KeepVersions) {
		// Housekeeping: a failure is logged, never fails the reconcile.
		if err := pruneVersions(ctx, p.aws.EC2, name, p.opts.KeepVersions, inUse); err != nil {
			log.FromContext(ctx).Info("could not prune old launch template versions", "launchTemplate", name, "error", err.Error())
		}
	}
	return obs, nil
}

// Delete removes the Auto Scaling group (terminating its instances), then
// the launch template, node access and the role and profile the group
// created. It returns false while the group is still being deleted.
func (p *Provisioner) Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	if configured(ig) != nil {
		return true, nil // nothing could have been created
	}
	c := ig.Spec.EKS.Configuration
	name := groupName(ig)
	cache := p.groupCache(c.ClusterName)
	cache.Invalidate()
	current, _, err := cache.Get(ctx, name)
	if err != nil {
		return false, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if current != nil && ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(current.Tags)) != nil {
		// Someone else's group of that name: never ours to delete.
		log.FromContext(ctx).Info("leaving an Auto Scaling group this InstanceGroup does not own", "group", name, "owner", ownership.Describe(asgTagMap(current.Tags)))
		current = nil
	}
	if current != nil {
		if current.Status == nil || awssdk.ToString(current.Status) != "Delete in progress" {
			_, err := p.aws.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{
				AutoScalingGroupName: awssdk.String(name), ForceDelete: awssdk.Bool(true)})
			if err != nil && !isGroupGone(err) {
				return false, fmt.Errorf("autoscaling DeleteAutoScalingGroup %s: %w", name, err)
			}
			cache.Invalidate()
		}
		return false, nil
	}
	if err := deleteLaunchTemplate(ctx, p.aws.EC2, ig, name); err != nil {
		return false, err
	}
	if cluster, err := p.clusters.get(ctx, c.ClusterName); err == nil {
		if err := p.access.revoke(ctx, ig, cluster, ig.Status.NodesInstanceRoleArn); err != nil {
			return false, err
		}
	} else if !providers.IsSpecError(err) {
		return false, err
	}
	if err := deleteRole(ctx, p.aws.IAM, ig); err != nil {
		return false, err
	}
	return true, nil
}

// Terminate implements providers.Rotator (Auto Scaling
// TerminateInstanceInAutoScalingGroup).
func (p *Provisioner) Terminate(ctx context.Context, ig *v1alpha1.InstanceGroup, instanceID string, decrement bool) error {
	_, err := p.aws.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: awssdk.String(instanceID), ShouldDecrementDesiredCapacity: awssdk.Bool(decrement)})
	p.groupCache(ig.Spec.EKS.Configuration.ClusterName).Invalidate()
	if err != nil {
		return fmt.Errorf("autoscaling TerminateInstanceInAutoScalingGroup %s: %w", instanceID, err)
	}
	return nil
}

// SetDesiredCapacity implements providers.Rotator (Auto Scaling SetDesiredCapacity).
func (p *Provisioner) SetDesiredCapacity(ctx context.Context, ig *v1alpha1.InstanceGroup, desired int) error {
	_, err := p.aws.AutoScaling.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: awssdk.String(groupName(ig)), DesiredCapacity: awssdk.Int32(int32(desired))})
	p.groupCache(ig.Spec.EKS.Configuration.ClusterName).Invalidate()
	if err != nil {
		return fmt.Errorf("autoscaling SetDesiredCapacity %s: %w", groupName(ig), err)
	}
	return nil
}

func isGroupGone(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "ValidationError" || ae.ErrorCode() == "ResourceInUse")
}
