package env

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Annotations the bridge puts on the Nodes it registers (besides
// KwokAnnotation). Nodes without BridgeInstanceAnnotation are never touched.
const (
	// BridgeInstanceAnnotation holds the EC2 instance id of the Node.
	BridgeInstanceAnnotation = "bridge.instancemgr.test/instance-id"
	// BridgeGroupAnnotation holds the name of the Auto Scaling group the
	// instance belonged to when its Node was registered.
	BridgeGroupAnnotation = "bridge.instancemgr.test/autoscaling-group"
)

// BridgeOptions configures a Bridge.
type BridgeOptions struct {
	// JoinDelay is how long an instance must have been running, as first
	// seen by this bridge, before its Node is registered (a boot and
	// kubelet start). 0 registers on the first poll that sees it running.
	JoinDelay time.Duration
	// PollInterval is the time between two syncs in Run. Default 1s.
	PollInterval time.Duration
	// Logger receives one line per Node registered or removed and per
	// problem (logged again only when it changes). Default: discard.
	Logger logr.Logger
}

// Bridge plays the part of the kubelets and of the cloud node lifecycle
// controller for EC2 instances in moto: every running instance of an Auto
// Scaling group becomes a Node (registered the way a kubelet would, with the
// labels and taints of its user data, simulated by kwok), and the Node is
// deleted when its instance is terminated, shutting down or gone.
//
// A Node is registered once; later changes to user data affect only new
// instances, as with real kubelets. Stopped instances keep their Node (kwok
// keeps it Ready); only terminated, shutting-down or vanished ones lose it.
// An instance whose user data a kubelet would refuse (malformed labels or
// taints, or --node-labels in the kubernetes.io / k8s.io namespaces outside
// the kubelet's allowed set) never joins; the reason is logged.
type Bridge struct {
	kube   kubernetes.Interface
	asg    bridgeAutoScaling
	ec2    bridgeEC2
	opts   BridgeOptions
	log    logr.Logger
	region string

	mu             sync.Mutex                          // serializes Sync
	neverJoin      map[string]bool                     // image ids whose instances never join (SetNeverJoinImages)
	neverJoinIf    func(group, instanceID string) bool // SetNeverJoin
	firstSeen      map[string]time.Time
	problems       map[string]string // instance id -> last problem logged
	kubeletVersion string

	auditMu  sync.Mutex // guards losses and forgiven (audit.go)
	losses   []Loss
	forgiven map[string]bool
}

// SetJoinDelay changes BridgeOptions.JoinDelay from the next sync on.
func (b *Bridge) SetJoinDelay(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.JoinDelay = d
}

// bridgeEC2 is the part of the EC2 API the bridge reads.
type bridgeEC2 interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeInstanceAttribute(context.Context, *ec2.DescribeInstanceAttributeInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceAttributeOutput, error)
	DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
}

// bridgeAutoScaling is the part of the Auto Scaling API the bridge reads.
type bridgeAutoScaling interface {
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	DescribeLaunchConfigurations(context.Context, *autoscaling.DescribeLaunchConfigurationsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLaunchConfigurationsOutput, error)
}

// NewBridge returns a Bridge that reads AWS through awsCfg and registers
// Nodes through kubeConfig. Call Run (or Sync) to make it work.
func NewBridge(kubeConfig *rest.Config, awsCfg aws.Config, opts BridgeOptions) (*Bridge, error) {
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("bridge: Kubernetes client: %w", err)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	return &Bridge{
		kube:      kube,
		asg:       autoscaling.NewFromConfig(awsCfg),
		ec2:       ec2.NewFromConfig(awsCfg),
		opts:      opts,
		log:       opts.Logger,
		region:    awsCfg.Region,
		firstSeen: map[string]time.Time{},
		problems:  map[string]string{},
	}, nil
}

// Run syncs every PollInterval until ctx ends. When AWS or the apiserver
// cannot be read the error is logged (once per distinct error) and the sync
// retried at the next poll; problems with single instances are logged by the
// sync itself. Run never panics.
func (b *Bridge) Run(ctx context.Context) {
	ticker := time.NewTicker(b.opts.PollInterval)
	defer ticker.Stop()
	lastErr := ""
	for {
		err, _ := b.sync(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && err.Error() != lastErr:
			b.log.Error(err, "sync failed; retrying every poll")
			lastErr = err.Error()
		case err == nil && lastErr != "":
			b.log.Info("sync recovered")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// SetNeverJoinImages makes instances of these AMI ids never become Nodes
// (as with a broken image whose kubelet never starts); the instances stay
// running. Instances that joined already keep their Nodes. Calling it
// again replaces the set; no ids clears it.
func (b *Bridge) SetNeverJoinImages(ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.neverJoin = map[string]bool{}
	for _, id := range ids {
		b.neverJoin[id] = true
	}
}

// Sync does one pass: register Nodes for instances that have been running
// for JoinDelay, and delete the bridge's Nodes whose instances are
// terminated, shutting down or gone. It returns an error when AWS or the
// apiserver cannot be read (then nothing is changed), joined with the
// problems of single instances (a user data a kubelet would refuse, a failed
// create or delete), which do not stop the pass for the other instances.
func (b *Bridge) Sync(ctx context.Context) error {
	readErr, problems := b.sync(ctx)
	return errors.Join(readErr, problems)
}

// sync is Sync with its two kinds of error apart.
func (b *Bridge) sync(ctx context.Context) (readErr, problems error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			readErr = fmt.Errorf("bridge sync panicked: %v", r)
		}
	}()

	groups, err := b.groupInstances(ctx)
	if err != nil {
		return err, nil
	}
	instances, err := b.instances(ctx)
	if err != nil {
		return err, nil
	}
	nodes, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Nodes: %w", err), nil
	}
	nodeOf := map[string]*corev1.Node{}
	for i := range nodes.Items {
		if id := nodes.Items[i].Annotations[BridgeInstanceAnnotation]; id != "" {
			nodeOf[id] = &nodes.Items[i]
		}
	}

	var errs []error
	problem := func(id, group string, err error) {
		errs = append(errs, err)
		if b.problems[id] != err.Error() {
			b.problems[id] = err.Error()
			b.log.Error(err, "retrying every poll", "instance", id, "group", group)
		}
	}
	// Removals first, so that a new instance reusing a private IP (and so a
	// Node name) of a terminated one can register in the same pass.
	for _, id := range slices.Sorted(maps.Keys(nodeOf)) {
		node := nodeOf[id]
		inst, ok := instances[id]
		state := "gone"
		if ok {
			state = instanceState(inst)
			if state != string(ec2types.InstanceStateNameShuttingDown) && state != string(ec2types.InstanceStateNameTerminated) {
				continue
			}
		}
		if err := b.audit(ctx, node, id); err != nil {
			problem(id, node.Annotations[BridgeGroupAnnotation], err)
			continue
		}
		if err := b.kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			problem(id, node.Annotations[BridgeGroupAnnotation], fmt.Errorf("delete Node %s of instance %s (%s): %w", node.Name, id, state, err))
			continue
		}
		b.log.Info("deleted Node", "node", node.Name, "instance", id, "instanceState", state)
		delete(nodeOf, id)
		delete(b.problems, id)
	}

	now := time.Now()
	running := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		inst, ok := instances[id]
		if !ok || instanceState(inst) != string(ec2types.InstanceStateNameRunning) {
			continue
		}
		running[id] = true
		if _, seen := b.firstSeen[id]; !seen {
			b.firstSeen[id] = now
		}
		if nodeOf[id] != nil || now.Sub(b.firstSeen[id]) < b.opts.JoinDelay {
			continue
		}
		if image := aws.ToString(inst.ImageId); b.neverJoin[image] {
			// A broken image: the instance runs but its kubelet never
			// registers. Logged once, not reported as a problem.
			if b.problems[id] == "" {
				b.problems[id] = "never joins"
				b.log.Info("instance never joins: its image is set to never join", "instance", id, "image", image, "group", groups[id].name)
			}
			continue
		}
		if b.neverJoinIf != nil && b.neverJoinIf(groups[id].name, id) {
			continue // a kubelet that never starts on this instance
		}
		if err := b.register(ctx, inst, groups[id]); err != nil {
			problem(id, groups[id].name, fmt.Errorf("instance cannot join: %w", err))
			continue
		}
		delete(b.problems, id)
	}
	for id := range b.firstSeen {
		if !running[id] {
			delete(b.firstSeen, id)
		}
	}
	for id := range b.problems {
		if !running[id] && nodeOf[id] == nil {
			delete(b.problems, id)
		}
	}
	return nil, errors.Join(errs...)
}

// SetNeverJoin makes the instances for which neverJoin(group, instanceID)
// is true never register a Node (an image whose kubelet does not start);
// nil lets every instance join again. It applies from the next sync, to
// instances without a Node.
func (b *Bridge) SetNeverJoin(neverJoin func(group, instanceID string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.neverJoinIf = neverJoin
}

// StopKubelet makes the bridge's Node name stop reporting, as a kubelet
// that died: kwok no longer manages it (its Lease is not renewed) and its
// Ready condition becomes False now; the node lifecycle controller later
// turns it Unknown and taints it. The instance keeps running.
func (b *Bridge) StopKubelet(ctx context.Context, name string) error {
	node, err := b.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("StopKubelet: get Node %s: %w", name, err)
	}
	if node.Annotations[BridgeInstanceAnnotation] == "" {
		return fmt.Errorf("StopKubelet: Node %s is not one of the bridge's", name)
	}
	delete(node.Annotations, KwokAnnotation)
	if node, err = b.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("StopKubelet: take Node %s from kwok: %w", name, err)
	}
	now := metav1.Now()
	for i, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			node.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
				Reason: "KubeletNotReady", Message: "kubelet stopped (test/env bridge)", LastHeartbeatTime: now, LastTransitionTime: now}
		}
	}
	if _, err := b.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("StopKubelet: mark Node %s NotReady: %w", name, err)
	}
	b.log.Info("stopped the kubelet of Node", "node", name, "instance", node.Annotations[BridgeInstanceAnnotation])
	return nil
}

// groupMember is what an Auto Scaling group says about one of its instances.
type groupMember struct {
	name                string
	lifecycleState      string
	launchTemplate      *asgtypes.LaunchTemplateSpecification // instance's, else group's
	launchConfiguration string                                // instance's, else group's
}

// groupInstances lists every instance of every Auto Scaling group.
func (b *Bridge) groupInstances(ctx context.Context) (map[string]groupMember, error) {
	members := map[string]groupMember{}
	pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(b.asg, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(100)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe Auto Scaling groups: %w", err)
		}
		for _, g := range page.AutoScalingGroups {
			groupLT := g.LaunchTemplate
			if groupLT == nil && g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil {
				groupLT = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
			}
			for _, inst := range g.Instances {
				m := groupMember{
					name:                aws.ToString(g.AutoScalingGroupName),
					lifecycleState:      string(inst.LifecycleState),
					launchTemplate:      groupLT,
					launchConfiguration: aws.ToString(g.LaunchConfigurationName),
				}
				if inst.LaunchTemplate != nil {
					m.launchTemplate = inst.LaunchTemplate
				}
				if lc := aws.ToString(inst.LaunchConfigurationName); lc != "" {
					m.launchConfiguration = lc
				}
				members[aws.ToString(inst.InstanceId)] = m
			}
		}
	}
	return members, nil
}

// instances lists every EC2 instance, terminated ones included.
func (b *Bridge) instances(ctx context.Context) (map[string]ec2types.Instance, error) {
	all := map[string]ec2types.Instance{}
	pages := ec2.NewDescribeInstancesPaginator(b.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe EC2 instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				all[aws.ToString(inst.InstanceId)] = inst
			}
		}
	}
	return all, nil
}

func instanceState(inst ec2types.Instance) string {
	if inst.State == nil {
		return ""
	}
	return string(inst.State.Name)
}

// register creates the Node of inst.
func (b *Bridge) register(ctx context.Context, inst ec2types.Instance, group groupMember) error {
	id := aws.ToString(inst.InstanceId)
	userData, source, err := b.userData(ctx, inst, group)
	if err != nil {
		return fmt.Errorf("instance %s: read user data: %w", id, err)
	}
	reg, err := ParseUserData(userData)
	if err != nil {
		return fmt.Errorf("instance %s: user data from %s: %w", id, source, err)
	}
	if rejected := kubeletRejectedLabels(reg.Labels); len(rejected) > 0 {
		return fmt.Errorf("instance %s: a kubelet refuses to start with --node-labels %s (user data from %s): labels in the kubernetes.io and k8s.io namespaces must be well-known or under kubelet.kubernetes.io/ or node.kubernetes.io/",
			id, strings.Join(rejected, ","), source)
	}
	if b.kubeletVersion == "" {
		v, err := b.kube.Discovery().ServerVersion()
		if err != nil {
			return fmt.Errorf("read apiserver version for the kubelet version: %w", err)
		}
		b.kubeletVersion = v.GitVersion
	}
	node, err := nodeFor(inst, group.name, b.region, b.kubeletVersion, reg)
	if err != nil {
		return err
	}
	_, err = b.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("instance %s: a Node named %s exists already and is not the bridge's Node for this instance", id, node.Name)
	}
	if err != nil {
		return fmt.Errorf("instance %s: create Node %s: %w", id, node.Name, err)
	}
	b.log.Info("registered Node", "node", node.Name, "instance", id, "group", group.name,
		"labelsFromUserData", reg.Labels, "taints", len(reg.Taints), "userData", source)
	return nil
}

// userData finds the user data inst booted with, and says where it was found:
// the instance's own userData attribute (what a real instance's kubelet
// reads), else the launch template version EC2 tagged the instance with,
// else the group's launch template or launch configuration.
func (b *Bridge) userData(ctx context.Context, inst ec2types.Instance, group groupMember) (data, source string, err error) {
	id := aws.ToString(inst.InstanceId)
	attr, err := b.ec2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
		InstanceId: inst.InstanceId,
		Attribute:  ec2types.InstanceAttributeNameUserData,
	})
	if err != nil {
		return "", "", fmt.Errorf("describe userData attribute of %s: %w", id, err)
	}
	if attr.UserData != nil && aws.ToString(attr.UserData.Value) != "" {
		return aws.ToString(attr.UserData.Value), "instance attribute userData", nil
	}

	var ltID, ltVersion string
	for _, tag := range inst.Tags {
		switch aws.ToString(tag.Key) {
		case "aws:ec2launchtemplate:id":
			ltID = aws.ToString(tag.Value)
		case "aws:ec2launchtemplate:version":
			ltVersion = aws.ToString(tag.Value)
		}
	}
	in := &ec2.DescribeLaunchTemplateVersionsInput{}
	switch {
	case ltID != "" && ltVersion != "":
		in.LaunchTemplateId = aws.String(ltID)
		in.Versions = []string{ltVersion}
	case group.launchTemplate != nil:
		in.LaunchTemplateId = group.launchTemplate.LaunchTemplateId
		if in.LaunchTemplateId == nil {
			in.LaunchTemplateName = group.launchTemplate.LaunchTemplateName
		}
		version := aws.ToString(group.launchTemplate.Version)
		if version == "" {
			version = "$Default"
		}
		in.Versions = []string{version}
	case group.launchConfiguration != "":
		out, err := b.asg.DescribeLaunchConfigurations(ctx, &autoscaling.DescribeLaunchConfigurationsInput{
			LaunchConfigurationNames: []string{group.launchConfiguration},
		})
		if err != nil {
			return "", "", fmt.Errorf("describe launch configuration %s: %w", group.launchConfiguration, err)
		}
		if len(out.LaunchConfigurations) == 0 {
			return "", "", fmt.Errorf("launch configuration %s of group %s does not exist", group.launchConfiguration, group.name)
		}
		return aws.ToString(out.LaunchConfigurations[0].UserData), "launch configuration " + group.launchConfiguration, nil
	default:
		return "", "no user data", nil
	}
	out, err := b.ec2.DescribeLaunchTemplateVersions(ctx, in)
	where := fmt.Sprintf("launch template %s%s version %s", aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName), in.Versions[0])
	if err != nil {
		return "", "", fmt.Errorf("describe %s: %w", where, err)
	}
	if len(out.LaunchTemplateVersions) == 0 || out.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return "", "", fmt.Errorf("%s does not exist", where)
	}
	return aws.ToString(out.LaunchTemplateVersions[0].LaunchTemplateData.UserData), where, nil
}

// nodeFor builds the Node a kubelet on inst would register: named after the
// private DNS name, providerID aws:///<az>/<id>, the well-known labels, the
// user data's labels and taints, addresses, capacity and node info.
func nodeFor(inst ec2types.Instance, group, region, kubeletVersion string, reg Registration) (*corev1.Node, error) {
	id := aws.ToString(inst.InstanceId)
	name := aws.ToString(inst.PrivateDnsName)
	if name == "" {
		return nil, fmt.Errorf("instance %s has no private DNS name yet", id)
	}
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	if zone == "" {
		return nil, fmt.Errorf("instance %s has no availability zone", id)
	}
	arch := "amd64"
	if inst.Architecture == ec2types.ArchitectureValuesArm64 || inst.Architecture == ec2types.ArchitectureValuesArm64Mac {
		arch = "arm64"
	}
	instanceType := string(inst.InstanceType)

	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: arch,
	}
	maps.Copy(labels, reg.Labels)
	labels[corev1.LabelInstanceTypeStable] = instanceType
	labels[corev1.LabelTopologyZone] = zone
	labels[corev1.LabelTopologyRegion] = region

	addresses := []corev1.NodeAddress{}
	if ip := aws.ToString(inst.PrivateIpAddress); ip != "" {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	addresses = append(addresses,
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: name},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: name})

	capacity := instanceCapacity(instanceType)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KwokAnnotation:           KwokAnnotationValue,
				BridgeInstanceAnnotation: id,
				BridgeGroupAnnotation:    group,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: fmt.Sprintf("aws:///%s/%s", zone, id),
			Taints:     slices.Clone(reg.Taints),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses:   addresses,
			DaemonEndpoints: corev1.NodeDaemonEndpoints{
				KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250},
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               strings.TrimPrefix(id, "i-"),
				SystemUUID:              id,
				KubeletVersion:          kubeletVersion,
				ContainerRuntimeVersion: "containerd://simulated-by-kwok",
				OperatingSystem:         "linux",
				Architecture:            arch,
				OSImage:                 "simulated EC2 instance " + aws.ToString(inst.ImageId),
			},
		},
	}, nil
}

// instanceCapacity estimates what a kubelet on an instance type reports:
// vCPUs and memory from the size and family, pods as the EKS default
// max-pods for that size. Unknown types get 2 vCPU, 8Gi, 29 pods.
func instanceCapacity(instanceType string) corev1.ResourceList {
	family, size, _ := strings.Cut(instanceType, ".")
	cpus, pods := 2, 29
	switch {
	case size == "nano" || size == "micro":
		cpus, pods = 2, 4
	case size == "small":
		cpus, pods = 2, 11
	case size == "medium":
		cpus, pods = 2, 17
	case size == "large":
		cpus, pods = 2, 29
	case size == "xlarge":
		cpus, pods = 4, 58
	case strings.HasSuffix(size, "xlarge"):
		if n, err := strconv.Atoi(strings.TrimSuffix(size, "xlarge")); err == nil && n > 0 {
			cpus, pods = 4*n, 58
			if n >= 4 {
				pods = 234
			}
			if n >= 16 {
				pods = 737
			}
		}
	case size == "metal":
		cpus, pods = 96, 737
	}
	gibPerCPU := 4
	switch {
	case strings.HasPrefix(family, "c"):
		gibPerCPU = 2
	case strings.HasPrefix(family, "r"):
		gibPerCPU = 8
	case strings.HasPrefix(family, "x"):
		gibPerCPU = 16
	}
	memory := resource.MustParse(fmt.Sprintf("%dGi", cpus*gibPerCPU))
	if family != "" && family[0] == 't' {
		// Burstable types below large have less memory than vCPUs suggest.
		switch size {
		case "nano":
			memory = resource.MustParse("512Mi")
		case "micro":
			memory = resource.MustParse("1Gi")
		case "small":
			memory = resource.MustParse("2Gi")
		case "medium":
			memory = resource.MustParse("4Gi")
		}
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory:           memory,
		corev1.ResourcePods:             *resource.NewQuantity(int64(pods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
}

// kubeletWellKnownLabels may be set with --node-labels even though they are
// in the kubernetes.io namespace.
var kubeletWellKnownLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true, //nolint:staticcheck // still accepted by the kubelet
	corev1.LabelFailureDomainBetaRegion: true, //nolint:staticcheck // still accepted by the kubelet
	corev1.LabelInstanceType:            true, //nolint:staticcheck // still accepted by the kubelet
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

// kubeletRejectedLabels returns, sorted, the label keys a kubelet refuses in
// --node-labels (it exits at start): keys in the kubernetes.io or k8s.io
// namespaces (or their subdomains) that are neither well-known nor under
// kubelet.kubernetes.io / node.kubernetes.io (or their subdomains).
func kubeletRejectedLabels(labels map[string]string) []string {
	var rejected []string
	for key := range labels {
		namespace, _, found := strings.Cut(key, "/")
		if !found || kubeletWellKnownLabels[key] {
			continue
		}
		inDomain := func(domain string) bool { return namespace == domain || strings.HasSuffix(namespace, "."+domain) }
		if !inDomain("kubernetes.io") && !inDomain("k8s.io") {
			continue
		}
		if inDomain("kubelet.kubernetes.io") || inDomain("node.kubernetes.io") {
			continue
		}
		rejected = append(rejected, key)
	}
	slices.Sort(rejected)
	return rejected
}

// Nodes returns the Nodes the bridge registered for the instances of the
// Auto Scaling group named group (all of the bridge's Nodes when group is
// empty), sorted by name.
func (b *Bridge) Nodes(ctx context.Context, group string) ([]corev1.Node, error) {
	list, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	var nodes []corev1.Node
	for _, n := range list.Items {
		if n.Annotations[BridgeInstanceAnnotation] == "" {
			continue
		}
		if group != "" && n.Annotations[BridgeGroupAnnotation] != group {
			continue
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

// NodeIsReady reports whether node has condition Ready=True and none of the
// taints the node lifecycle controller puts on nodes that are not ready.
func NodeIsReady(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitForReadyNodes polls every 250ms until the group's bridge Nodes are
// exactly count and all ready (NodeIsReady), and returns them. It returns
// ctx's error, with what it saw last, when ctx ends first.
func (b *Bridge) WaitForReadyNodes(ctx context.Context, group string, count int) ([]corev1.Node, error) {
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	last := "nothing yet"
	for {
		nodes, err := b.Nodes(ctx, group)
		if err == nil {
			ready := 0
			for i := range nodes {
				if NodeIsReady(&nodes[i]) {
					ready++
				}
			}
			if len(nodes) == count && ready == count {
				return nodes, nil
			}
			last = fmt.Sprintf("%d Nodes, %d ready", len(nodes), ready)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %d ready Nodes of group %q: %w (last seen: %s)", count, group, ctx.Err(), last)
		case <-ticker.C:
		}
	}
}
