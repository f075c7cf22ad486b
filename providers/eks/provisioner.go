// Package eks is the eks provisioner: an InstanceGroup becomes an IAM role
// and instance profile, a launch template (one version per change), an
// Auto Scaling group, and node access (aws-auth or an EKS access entry), so
// its instances join the EKS cluster as nodes.
package eks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/reads"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
)

// Options tune the provisioner.
type Options struct {
	// GroupCacheTTL is how long one listing of a cluster's Auto Scaling
	// groups serves a group that is converging (being created, scaled,
	// rotated, failing); our own writes invalidate it. Default 30s. A Ready
	// group accepts a listing up to twice PollPeriod old.
	GroupCacheTTL time.Duration
	// PollPeriod is how often Watch lists each cluster's Auto Scaling
	// groups (one paginated, tag-filtered DescribeAutoScalingGroups
	// sequence per cluster), comparing each listing with the one before:
	// changes made outside instance-manager are noticed within it. Default
	// 2m.
	PollPeriod time.Duration
	// CloudResync is how long what a group read is trusted while its spec
	// does not change: its IAM role, policies and instance profile, launch
	// template, node access (access entries), and the subnets and security
	// groups its references name (see Reads). A change made to those by
	// hand is undone within it. Default 1h.
	CloudResync time.Duration
	// ImageRecheck is how often "latest" and "ssm://" images are re-read
	// from SSM. Default 10m.
	ImageRecheck time.Duration
	// KeepVersions is how many launch template versions are kept. Default 3.
	KeepVersions int
	// WaitPollPeriod replaces PollPeriod for a cluster while an instance
	// of its listing waits in Terminating:Wait (the termination controller
	// is draining it). Default and at most min(10s, PollPeriod).
	WaitPollPeriod time.Duration
	// DrainHookHeartbeat is the HeartbeatTimeout of the termination
	// lifecycle hook (awsp.DrainHookName) put on every Auto Scaling group.
	// Default awsp.DrainHookHeartbeat(10m, PollPeriod); clamped to AWS's
	// 30 s to 7200 s.
	DrainHookHeartbeat time.Duration
	// NodeRoleCNIPolicy keeps AmazonEKS_CNI_Policy on the node roles the
	// provisioner creates (see iamrole.CNIPolicy). Default off.
	NodeRoleCNIPolicy bool
	// Reader reads InstanceGroups from the API server itself (the
	// manager's APIReader): resources an earlier InstanceGroup of the same
	// name left are adopted once it shows their recorded UID gone
	// (ownership.Adopter). nil: nothing is adopted.
	Reader client.Reader
	// References caches the resolved subnets, security groups and images,
	// shared with admission (refcheck.Checker.Refs) so either warms the
	// other; nil: the provisioner's own.
	References *resolve.Cache
}

// Provisioner implements providers.Provisioner and providers.Rotator for
// provisioner "eks" (and its deprecated alias "eks-cf").
type Provisioner struct {
	aws    *awsp.Clients
	access nodeAccess
	opts   Options
	adopt  *ownership.Adopter

	clusters  *clusters
	images    *images
	launched  *launchedVersions
	contents  versionContents
	templates ownedTemplates
	pools     *instancePools
	capacity  *podCapacity
	warm      warmPools
	failures  launchFailures

	reads  *reads.Reads
	notify atomic.Pointer[func(types.NamespacedName)] // set by Watch

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
	if opts.PollPeriod <= 0 {
		opts.PollPeriod = 2 * time.Minute
	}
	if opts.CloudResync <= 0 {
		opts.CloudResync = reads.DefaultCloudResync
	}
	if opts.WaitPollPeriod <= 0 {
		opts.WaitPollPeriod = 10 * time.Second
	}
	opts.WaitPollPeriod = min(opts.WaitPollPeriod, opts.PollPeriod)
	if opts.DrainHookHeartbeat <= 0 {
		opts.DrainHookHeartbeat = awsp.DrainHookHeartbeat(10*time.Minute, opts.PollPeriod)
	}
	opts.DrainHookHeartbeat = min(max(opts.DrainHookHeartbeat, awsp.MinHookHeartbeat), awsp.MaxHookHeartbeat)
	cached := reads.New(opts.CloudResync)
	if opts.References != nil {
		cached.Refs = opts.References
	}
	return &Provisioner{
		aws: clients, access: nodeAccess{kube: kube, eks: clients.EKS, iam: clients.IAM}, opts: opts,
		adopt:    &ownership.Adopter{Reader: opts.Reader},
		clusters: &clusters{api: clients.EKS, ttl: 10 * time.Minute, now: time.Now},
		images:   &images{ssm: clients.SSM, refs: cached.Refs, ttl: opts.ImageRecheck},
		launched: &launchedVersions{api: clients.EC2},
		pools:    &instancePools{api: clients.EC2, ttl: 24 * time.Hour, now: time.Now},
		capacity: &podCapacity{api: clients.EC2, ttl: 24 * time.Hour, now: time.Now},
		reads:    cached,
		groups:   map[string]*awsp.ScalingGroupCache{},
	}
}

// Reads is what the provisioner remembers of its reads (tests, the
// benchmarks).
func (p *Provisioner) Reads() *reads.Reads { return p.reads }

func (p *Provisioner) groupCache(cluster string) *awsp.ScalingGroupCache {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.groups[cluster]
	if !ok {
		c = awsp.NewScalingGroupCache(p.aws.AutoScaling, cluster, p.opts.GroupCacheTTL)
		c.OnChange(p.changed)
		p.groups[cluster] = c
	}
	return c
}

// changed tells Watch's caller which InstanceGroups own the Auto Scaling
// groups a listing found changed (by their ownership tag).
func (p *Provisioner) changed(groups []astypes.AutoScalingGroup) {
	notify := p.notify.Load()
	if notify == nil {
		return
	}
	for _, g := range groups {
		owner := asgTagMap(g.Tags)[ownership.TagInstanceGroup]
		if ns, name, ok := strings.Cut(owner, "/"); ok && ns != "" && name != "" {
			(*notify)(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
}

// Watch implements providers.Watcher: every PollPeriod (WaitPollPeriod
// while an instance of the cluster waits in Terminating:Wait) it lists the
// Auto Scaling groups of each cluster that groups were reconciled for within
// CloudResync (unless a write's refresh just did), and calls changed with
// the owner of every Auto Scaling group that appeared, changed or
// disappeared between two listings, whoever made the change. It returns
// when ctx ends.
func (p *Provisioner) Watch(ctx context.Context, changed func(types.NamespacedName)) error {
	p.notify.Store(&changed)
	defer p.notify.Store(nil)
	tick := time.NewTicker(max(min(p.opts.PollPeriod/4, p.opts.WaitPollPeriod), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		p.mu.Lock()
		caches := make(map[string]*awsp.ScalingGroupCache, len(p.groups))
		for cluster, c := range p.groups {
			caches[cluster] = c
		}
		p.mu.Unlock()
		for _, cluster := range slices.Sorted(maps.Keys(caches)) {
			c := caches[cluster]
			if time.Since(c.LastRead()) > p.opts.CloudResync {
				continue // no group of this cluster any more
			}
			period := p.opts.PollPeriod
			if c.Waiting() {
				// An instance waits in Terminating:Wait: list often
				// enough to see its drain end and the next one begin.
				period = p.opts.WaitPollPeriod
			}
			if err := c.Refresh(ctx, period); err != nil && ctx.Err() == nil {
				log.FromContext(ctx).Info("could not list Auto Scaling groups", "cluster", cluster, "error", err.Error())
			}
		}
		p.forgetGone()
	}
}

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKS == nil || ig.Spec.EKS.Configuration == nil {
		return &providers.SpecError{Field: "spec.eks.configuration", Detail: "required by the eks provisioner"}
	}
	return nil
}

// Stages of a group's reads (see Reads).
const (
	stageRole     = "role"
	stageTemplate = "launch-template"
	stageAccess   = "node-access"
	stagePrune    = "pruned-versions"
)

// readsID identifies the group in Reads: its name and UID, so a group
// deleted and created again starts afresh.
func readsID(ig *v1alpha1.InstanceGroup) types.UID {
	return types.UID(ownership.GroupTag(ig) + "/" + string(ig.UID))
}

// settled reports whether the group was Ready for its current spec when
// this reconcile began: it then accepts an older listing of its Auto
// Scaling group (Watch keeps the listing current).
func settled(ig *v1alpha1.InstanceGroup) bool {
	return ig.Status.CurrentState == v1alpha1.StateReady && ig.Status.ObservedGeneration == ig.Generation
}

// Apply converges the group's IAM role, launch template, Auto Scaling group
// and node access to ig.Spec and observes the group. See
// providers.Provisioner.
//
// What it reads besides the shared Auto Scaling listing (the role, the
// launch template, subnets and security groups, node access) is kept in
// Reads and read again only when what it depends on changes, after
// CloudResync, or sooner while the group fails: a Ready group whose spec and
// Auto Scaling group have not changed makes no AWS call of its own.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (obs *providers.Observation, err error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	gid := readsID(ig)
	ctx, flush := providers.CollectAdoptions(ctx)
	defer flush()
	stage := "" // the read in progress, forgotten when it fails
	defer func() {
		if err != nil && stage != "" {
			p.reads.Drop(gid, stage)
		}
		p.reads.Done(gid, failing(obs, err))
	}()
	b, err := p.buildTemplate(ctx, ig, gid, &stage)
	if err != nil {
		return nil, err
	}
	spec, c := ig.Spec.EKS, ig.Spec.EKS.Configuration
	name, version, target, cluster, roleARN := b.name, b.target.version, b.target, b.cluster, b.roleARN
	subnets, instanceTypes := b.subnets, b.instanceTypes

	cache := p.groupCache(c.ClusterName)
	maxAge := p.opts.GroupCacheTTL
	if settled(ig) {
		maxAge = 2 * p.opts.PollPeriod
	}
	current, _, err := cache.GetWithin(ctx, name, maxAge)
	if err != nil {
		return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if current != nil {
		retag := func(ctx context.Context, tags map[string]string) error {
			cache.Invalidate()
			return tagScalingGroup(ctx, p.aws.AutoScaling, name, tags)
		}
		if _, err := providers.Adopt(ctx, p.adopt, ownerOf(ig), "Auto Scaling group", name, asgTagMap(current.Tags), retag); err != nil {
			return nil, err
		}
	}
	launchFrom := version
	if current != nil {
		// After a stopped rotation, the last good version (groupVersion).
		versions, err := p.stoppedVersions(ctx, ig, version, current)
		if err != nil {
			return nil, err
		}
		launchFrom = groupVersion(ig, version, current.Instances, versions)
	}
	g := groupSpec{name: name, template: name, version: launchFrom, subnets: subnets, min: int32(spec.MinSize), max: int32(spec.MaxSize),
		instanceTypes: instanceTypes, drainHeartbeat: p.opts.DrainHookHeartbeat}
	if current != nil {
		if wrote, err := p.suspendBeforeChange(ctx, p.aws.AutoScaling, ig, g, target, current); err != nil {
			return nil, err
		} else if wrote {
			cache.Invalidate()
			if current, _, err = cache.Get(ctx, name); err != nil {
				return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
			}
		}
	}
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
		// The tag-filtered listing may lag the create (eventual consistency).
		return nil, providers.Transient(fmt.Errorf("Auto Scaling group %s was created but is not listed yet", name))
	}
	ids := instanceIDs(current.Instances)
	judged, err := p.instanceDrift(ctx, ig, g, target, current.Instances)
	if err != nil {
		return nil, err
	}
	// AZRebalance is suspended while the group rotates (drift or a surge
	// recorded), judged from the cloud and the status, so a restarted
	// controller keeps it suspended, and resumed after.
	isRotating := rotating(ig, current.Instances, judged.drift)
	if wrote, err := ensureGroupFeatures(ctx, p.aws.AutoScaling, ig, current, isRotating); err != nil {
		return nil, err
	} else if wrote {
		cache.Invalidate()
	}
	if wrote, err := p.ensureHooks(ctx, ig, gid, current); err != nil {
		return nil, err
	} else if wrote {
		cache.Invalidate()
	}
	stage = stageAccess
	if err := p.grant(ctx, ig, gid, cluster, roleARN); err != nil {
		return nil, err
	}
	hold, wrote, err := p.warm.hold(ctx, p.aws.AutoScaling, ig, current, version, judged.upToDate, p.launched.lookup)
	if err != nil {
		return nil, err
	}
	if wrote {
		cache.Invalidate()
	}
	stage = ""

	return p.observe(ctx, ig, gid, b, current, judged, ids, hold)
}

// built is what Apply has resolved and written before the Auto Scaling
// group: the cluster, the subnets and instance types the group uses, the
// node role and the launch template (name; target is its default version).
type built struct {
	cluster       ClusterInfo
	subnets       []string
	instanceTypes []v1alpha1.InstanceTypeSpec
	roleARN, name string
	target        templateState
}

// buildTemplate resolves the group's references (cluster, subnets,
// security groups, instance types, image), checks its sizes and bootstrap,
// and converges its node role and launch template. *stage names the cached
// read in progress (Apply forgets it when the call fails).
func (p *Provisioner) buildTemplate(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID, stage *string) (built, error) {
	spec := ig.Spec.EKS
	c := spec.Configuration
	cluster, err := p.clusters.get(ctx, c.ClusterName)
	if err != nil {
		return built{}, err
	}
	subnets, err := p.reads.Subnets(ctx, p.aws.EC2, gid, c.Subnets, "spec.eks.configuration.subnets")
	if err != nil {
		return built{}, err
	}
	sgs, err := p.reads.SecurityGroups(ctx, p.aws.EC2, gid, c.SecurityGroups, "spec.eks.configuration.securityGroups")
	if err != nil {
		return built{}, err
	}
	instanceTypes, err := instanceTypesOf(ctx, p.pools, ig)
	if err != nil {
		return built{}, err
	}
	if err := checkMaxPods(ctx, p.capacity, ig, typeNames(c.InstanceType, instanceTypes)); err != nil {
		return built{}, err
	}
	*stage = stageRole
	roleARN, profile, err := p.role(ctx, ig, gid)
	if err != nil {
		return built{}, err
	}
	name := groupName(ig)
	*stage = stageTemplate
	tmpl, err := p.template(ctx, ig, gid, name)
	if err != nil {
		return built{}, err
	}
	// The AMI the group's boundaries revision pins (admission writes it),
	// so that a newly published one reaches the group in its rollout
	// wave; without a pin, the reference is resolved here.
	image := c.ResolvedImage
	if image == "" {
		if image, err = p.images.resolve(ctx, ig, cluster.Version); err != nil {
			return built{}, err
		}
	}
	if ig.Annotations[v1alpha1.AnnotationLockUpgrades] == "true" && c.Image != image && tmpl.imageID != "" {
		image = tmpl.imageID // a newly published AMI is not drift while locked
	}
	sizes := map[string]int64{"spec.eks.minSize": spec.MinSize, "spec.eks.maxSize": spec.MaxSize}
	if wp := spec.WarmPool; wp != nil {
		sizes["spec.eks.warmPool.minSize"] = wp.MinSize
		if wp.MaxSize != -1 {
			sizes["spec.eks.warmPool.maxSize"] = wp.MaxSize
		}
	}
	if err := providers.CheckInt32(sizes); err != nil {
		return built{}, err
	}
	b := groupBootstrap(ig, cluster)
	if err := b.Validate(); err != nil {
		return built{}, err
	}
	ud := b.UserData()
	data := launchDataOf(ig, launchInput{imageID: image, profileName: profile, securityGroups: sgs, userData: ud})
	target, err := ensureLaunchTemplate(ctx, p.aws.EC2, ig, name, tmpl, data, &p.contents)
	if err != nil {
		return built{}, err
	}
	if target != tmpl {
		// What this call wrote (or made the default) is the template's
		// default version now.
		p.reads.Update(gid, stageTemplate, name, target)
	}
	*stage = ""
	return built{cluster: cluster, subnets: subnets, instanceTypes: instanceTypes, roleARN: roleARN, name: name, target: target}, nil
}

// observe reports the group as Apply left it: sizes, the instances with
// their drift judged (instanceDrift), weights and node names,
// a launch failure, and prunes launch template versions no instance uses.
func (p *Provisioner) observe(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID, b built, current *astypes.AutoScalingGroup,
	judged judgement, ids []string, hold string) (*providers.Observation, error) {
	name, version, roleARN, instanceTypes := b.name, b.target.version, b.roleARN, b.instanceTypes
	var err error
	obs := &providers.Observation{
		GroupName: name, LaunchTemplateName: name, LatestTemplateVersion: strconv.FormatInt(version, 10), RoleARN: roleARN,
		Min: int(awssdk.ToInt32(current.MinSize)), Max: int(awssdk.ToInt32(current.MaxSize)), Desired: int(awssdk.ToInt32(current.DesiredCapacity)),
		Lifecycle: lifecycleOf(ig), Hold: hold,
	}
	if ig.Spec.EKS.WarmPool != nil {
		var inService []string
		for _, in := range current.Instances {
			if in.LifecycleState == astypes.LifecycleStateInService {
				inService = append(inService, awssdk.ToString(in.InstanceId))
			}
		}
		if err := p.launched.startedInService(ctx, inService); err != nil {
			return nil, err
		}
	}
	inUse := map[string]bool{obs.LatestTemplateVersion: true}
	weights := weightsOf(instanceTypes)
	dnsNames, launchTimes := p.launched.dnsNames(ids), p.launched.launchTimes(ids)
	for _, in := range current.Instances {
		v := launchVersion(in, judged.launched)
		inUse[v] = true
		drift := judged.drift[awssdk.ToString(in.InstanceId)]
		obs.Instances = append(obs.Instances, providers.Instance{
			ID:             awssdk.ToString(in.InstanceId),
			ProviderID:     fmt.Sprintf("aws:///%s/%s", awssdk.ToString(in.AvailabilityZone), awssdk.ToString(in.InstanceId)),
			LifecycleState: string(in.LifecycleState),
			Healthy:        awssdk.ToString(in.HealthStatus) == "Healthy",
			UpToDate:       drift == "",
			Drift:          drift,
			PrivateDNSName: dnsNames[awssdk.ToString(in.InstanceId)],
			LaunchTime:     launchTimes[awssdk.ToString(in.InstanceId)],
			Weight:         instanceWeight(in, weights),
		})
	}
	if obs.LaunchFailure, err = p.failures.read(ctx, p.aws.AutoScaling, name, obs.Desired, obs.Instances); err != nil {
		return nil, err
	}
	if version > int64(p.opts.KeepVersions) {
		// Housekeeping, once per latest version and set of versions in
		// use: a failure is logged, never fails the reconcile.
		key := fmt.Sprint(slices.Sorted(maps.Keys(inUse)))
		if _, done := p.reads.Load(gid, gid, stagePrune, key); !done {
			if err := pruneVersions(ctx, p.aws.EC2, name, p.opts.KeepVersions, inUse); err != nil {
				log.FromContext(ctx).Info("could not prune old launch template versions", "launchTemplate", name, "error", err.Error())
			} else {
				p.reads.Store(gid, stagePrune, key, true)
			}
		}
	}
	return obs, nil
}

// failing is the outcome of an Apply for Reads: its error, or one for a
// launch failure (the group cannot launch: a deleted instance profile or
// security group is one cause, so what was read is trusted for
// Reads.FailingTTL only, review 2026-11-29 N13).
func failing(obs *providers.Observation, err error) error {
	if err == nil && obs != nil && obs.LaunchFailure != "" {
		return errors.New(obs.LaunchFailure)
	}
	return err
}

// role returns the nodes' role ARN and instance profile (ensureRole), read
// again only when what shapes them changes (or per Reads).
func (p *Provisioner) role(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID) (string, string, error) {
	c := ig.Spec.EKS.Configuration
	key := "byo\x00" + c.RoleName + "\x00" + c.InstanceProfileName
	if !byoRole(ig) {
		raw, err := json.Marshal(nodeRole(ig, p.opts.NodeRoleCNIPolicy))
		if err != nil {
			return "", "", err
		}
		key = string(raw)
	}
	if v, ok := p.reads.Load(gid, gid, stageRole, key); ok {
		r := v.([2]string)
		return r[0], r[1], nil
	}
	arn, profile, err := ensureRole(ctx, p.aws.IAM, p.adopt, ig, p.opts.NodeRoleCNIPolicy)
	if err != nil {
		return "", "", err
	}
	p.reads.Store(gid, stageRole, key, [2]string{arn, profile})
	return arn, profile, nil
}

// template returns the launch template as last read or written
// (describeTemplate and its ownership check when not known).
func (p *Provisioner) template(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID, name string) (templateState, error) {
	if v, ok := p.reads.Load(gid, gid, stageTemplate, name); ok {
		return v.(templateState), nil
	}
	tmpl, err := describeTemplate(ctx, p.aws.EC2, name)
	if err != nil {
		return templateState{}, err
	}
	if err := p.templates.check(ctx, p.aws.EC2, p.adopt, ig, name, tmpl); err != nil {
		return templateState{}, err
	}
	p.reads.Store(gid, stageTemplate, name, tmpl)
	return tmpl, nil
}

// grant gives the nodes access (nodeAccess.grant). An access entry, once
// made or found, is not asked for again (per Reads): EKS would answer each
// repeat with ResourceInUseException. aws-auth costs no AWS call and is
// checked every time.
func (p *Provisioner) grant(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID, cluster ClusterInfo, roleARN string) error {
	if cluster.AuthenticationMode != modeAPI && cluster.AuthenticationMode != modeBoth {
		return p.access.grant(ctx, ig, cluster, roleARN)
	}
	key := strings.Join([]string{cluster.Name, cluster.AuthenticationMode, roleARN, osFamily(ig)}, "\x00")
	if _, ok := p.reads.Load(gid, gid, stageAccess, key); ok {
		return nil
	}
	if err := p.access.grant(ctx, ig, cluster, roleARN); err != nil {
		return err
	}
	p.reads.Store(gid, stageAccess, key, true)
	return nil
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
	p.contents.forget(name)
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
	p.reads.Forget(readsID(ig))
	return true, nil
}

// Instances implements providers.InstanceLister: the instances of the
// group's Auto Scaling group (DescribeAutoScalingGroups through the
// cluster's shared cached listing; EC2 DescribeInstances for private DNS
// names not known yet). None when the group does not exist or
// belongs to someone else.
func (p *Provisioner) Instances(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	if configured(ig) != nil {
		return nil, nil
	}
	c := ig.Spec.EKS.Configuration
	name := groupName(ig)
	cache := p.groupCache(c.ClusterName)
	current, _, err := cache.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if current == nil || ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(current.Tags)) != nil {
		return nil, nil
	}
	ids := make([]string, 0, len(current.Instances))
	for _, in := range current.Instances {
		ids = append(ids, awssdk.ToString(in.InstanceId))
	}
	if _, err := p.launched.lookup(ctx, ids); err != nil {
		return nil, err
	}
	dnsNames := p.launched.dnsNames(ids)
	out := make([]providers.Instance, 0, len(current.Instances))
	for _, in := range current.Instances {
		id := awssdk.ToString(in.InstanceId)
		out = append(out, providers.Instance{
			ID:             id,
			ProviderID:     fmt.Sprintf("aws:///%s/%s", awssdk.ToString(in.AvailabilityZone), id),
			LifecycleState: string(in.LifecycleState),
			Healthy:        awssdk.ToString(in.HealthStatus) == "Healthy",
			PrivateDNSName: dnsNames[id],
			Weight:         instanceWeight(in, nil), // as Auto Scaling reports it
		})
	}
	return out, nil
}

// Sizes implements providers.SizeReader: MinSize and DesiredCapacity from
// the cluster's shared Auto Scaling listing (DescribeAutoScalingGroups, at
// most one listing period old); found is false for a group that does not
// exist or that another owner tagged.
func (p *Provisioner) Sizes(ctx context.Context, ig *v1alpha1.InstanceGroup) (int, int, bool, error) {
	if configured(ig) != nil {
		return 0, 0, false, nil
	}
	c := ig.Spec.EKS.Configuration
	name := groupName(ig)
	current, _, err := p.groupCache(c.ClusterName).Get(ctx, name)
	if err != nil {
		return 0, 0, false, fmt.Errorf("autoscaling DescribeAutoScalingGroups (cluster %s): %w", c.ClusterName, err)
	}
	if current == nil || ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(current.Tags)) != nil {
		return 0, 0, false, nil
	}
	return int(awssdk.ToInt32(current.MinSize)), int(awssdk.ToInt32(current.DesiredCapacity)), true, nil
}

// FreshInstances implements providers.FreshLister: one
// DescribeAutoScalingGroups of the group by name, bypassing the cluster's
// shared listing (whose copy it refreshes no further).
func (p *Provisioner) FreshInstances(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	if configured(ig) != nil {
		return nil, nil
	}
	name := groupName(ig)
	out, err := p.aws.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", name, err)
	}
	if len(out.AutoScalingGroups) == 0 || ownerOf(ig).Check("Auto Scaling group", name, asgTagMap(out.AutoScalingGroups[0].Tags)) != nil {
		return nil, nil
	}
	g := out.AutoScalingGroups[0]
	list := make([]providers.Instance, 0, len(g.Instances))
	for _, in := range g.Instances {
		id := awssdk.ToString(in.InstanceId)
		list = append(list, providers.Instance{
			ID: id, ProviderID: fmt.Sprintf("aws:///%s/%s", awssdk.ToString(in.AvailabilityZone), id),
			LifecycleState: string(in.LifecycleState), Healthy: awssdk.ToString(in.HealthStatus) == "Healthy",
		})
	}
	return list, nil
}

// Terminate implements providers.Rotator (Auto Scaling
// TerminateInstanceInAutoScalingGroup). A decrement refused because the
// desired capacity is at minSize (ValidationError) wraps
// providers.ErrDesiredAtMinSize. An instance already gone from the group
// (terminated by the cluster-autoscaler, a spot interruption, a rebalance or
// an earlier call: ValidationError "Instance Id not found - No managed
// instance found for instance ID: i-…", or EC2's InvalidInstanceID.NotFound)
// is success: what was asked is done.
func (p *Provisioner) Terminate(ctx context.Context, ig *v1alpha1.InstanceGroup, instanceID string, decrement bool) error {
	_, err := p.aws.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: awssdk.String(instanceID), ShouldDecrementDesiredCapacity: awssdk.Bool(decrement)})
	p.groupCache(ig.Spec.EKS.Configuration.ClusterName).Invalidate()
	switch {
	case err == nil:
		return nil
	case decrement && refusedAtMinSize(err):
		return fmt.Errorf("autoscaling TerminateInstanceInAutoScalingGroup %s with a decrement: %w (%v)", instanceID, providers.ErrDesiredAtMinSize, err)
	case instanceGone(err):
		log.FromContext(ctx).Info("instance to terminate is already gone from its Auto Scaling group", "instance", instanceID, "answer", err.Error())
		return nil
	}
	return fmt.Errorf("autoscaling TerminateInstanceInAutoScalingGroup %s: %w", instanceID, err)
}

// instanceGone reports whether err is Auto Scaling's or EC2's answer for an
// instance that is no longer there (see Terminate).
func instanceGone(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	if ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return true
	}
	msg := strings.ToLower(ae.ErrorMessage())
	return ae.ErrorCode() == "ValidationError" && (strings.Contains(msg, "instance id not found") || strings.Contains(msg, "no managed instance found"))
}

// refusedAtMinSize reports whether err is Auto Scaling's refusal to
// decrement a desired capacity at the group's minimum size.
func refusedAtMinSize(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		return false
	}
	msg := strings.ToLower(ae.ErrorMessage())
	return strings.Contains(msg, "min size") || strings.Contains(msg, "minsize") || strings.Contains(msg, "min_size") || strings.Contains(msg, "minimum")
}

// AddCapacity implements providers.Rotator: it reads the group's desired
// capacity from Auto Scaling (DescribeAutoScalingGroups by name, not the
// cluster's cached listing) and sets it plus delta, within MaxSize
// (SetDesiredCapacity). Someone else (the cluster-autoscaler) may still
// change it between the two calls; that window is one round trip, not a
// cache's age. A negative delta is refused (providers.ErrScaleIn, no call
// made): a lower desired capacity makes Auto Scaling terminate instances
// of its own choosing (its termination policy), which nothing drains.
func (p *Provisioner) AddCapacity(ctx context.Context, ig *v1alpha1.InstanceGroup, delta int) (int, error) {
	name := groupName(ig)
	if delta < 0 {
		return 0, fmt.Errorf("Auto Scaling group %s: adding %d capacity unit(s): %w", name, delta, providers.ErrScaleIn)
	}
	out, err := p.aws.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return 0, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", name, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		// Just created, or deleted out of band: Apply lists or creates it again.
		return 0, providers.Transient(fmt.Errorf("Auto Scaling group %s not found", name))
	}
	g := out.AutoScalingGroups[0]
	cur := int(awssdk.ToInt32(g.DesiredCapacity))
	want := min(max(cur+delta, int(awssdk.ToInt32(g.MinSize))), int(awssdk.ToInt32(g.MaxSize)))
	if want == cur {
		return 0, nil
	}
	_, err = p.aws.AutoScaling.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: awssdk.String(name), DesiredCapacity: awssdk.Int32(int32(want))})
	p.groupCache(ig.Spec.EKS.Configuration.ClusterName).Invalidate()
	if err != nil {
		return 0, fmt.Errorf("autoscaling SetDesiredCapacity %s %d: %w", name, want, err)
	}
	return want - cur, nil
}

func isGroupGone(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "ValidationError" || ae.ErrorCode() == "ResourceInUse")
}
