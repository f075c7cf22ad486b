package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/test/install"
)

// Sizes and periods of the AWS call figures (environment variables shorten
// them for a quick run).
var (
	fleetGroups    = envInt("BENCH_FLEET_GROUPS", 200)
	fleetIdle      = envDuration("BENCH_FLEET_IDLE", 4*time.Minute)
	workloadIdle   = envDuration("BENCH_WORKLOAD_IDLE", 5*time.Minute)
	rotationJoin   = envDuration("BENCH_ROTATION_JOIN_DELAY", 20*time.Second)
	workloadJoin   = 5 * time.Second // the demo's node join delay
	failingWarmup  = time.Minute     // a failing group's first retries, 1 s, 2 s, 4 s … apart
	failingMarker  = "-bench-failing-"
	workloadGroups = 10
)

// The failing group's launch template is refused: these are the calls it
// makes, its retries (the launch template) and, 5 minutes after it read
// them, what it reads before (its references, shared with the other groups,
// and its role); an idle group makes none of them.
var failingOps = []string{"EC2 DescribeLaunchTemplateVersions", "EC2 CreateLaunchTemplate",
	"EC2 DescribeSubnets", "EC2 DescribeSecurityGroups", "IAM GetRole", "IAM ListAttachedRolePolicies", "IAM GetInstanceProfile"}

// world is a local environment (control plane, kwok, moto, the bridge) with
// the demo's cloud (install.NewCloud: the example boundary ConfigMap's
// cluster, subnets, security group, node role and key pair), its boundary
// ConfigMap, and the manager in process with the binary's defaults.
type world struct {
	env   *env.Environment
	admin client.Client
	cloud *install.Cloud
	mgr   *harness.Manager
}

func newWorld(joinDelay time.Duration) (*world, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := env.AllComponents()
	opts.CRDDirectoryPaths = []string{harness.CRDPath()}
	opts.WebhookInstallOptions = harness.WebhookOptions()
	opts.JoinDelay = joinDelay
	e, err := env.New(ctx, opts)
	if errors.Is(err, env.ErrNoEnvironment) {
		return nil, errNoEnvironment
	}
	if err != nil {
		return nil, fmt.Errorf("local environment: %w", err)
	}
	w := &world{env: e}
	if err := w.setUp(ctx); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *world) setUp(ctx context.Context) error {
	var err error
	if w.admin, err = client.New(w.env.Config, client.Options{Scheme: app.Scheme()}); err != nil {
		return err
	}
	if err := harness.EnsureConfigNamespace(ctx, w.admin); err != nil {
		return err
	}
	if w.cloud, err = install.NewCloud(ctx, w.env.AWS); err != nil {
		return err
	}
	// The binary's defaults, but for the clients: the failing group's
	// launch template is refused with an authorization failure whose text
	// changes on every call, as AWS's does.
	faulty := harness.FailCalls(w.env.AWS, func(_ string, in any) error {
		if lt, ok := in.(*ec2.CreateLaunchTemplateInput); ok && strings.Contains(aws.ToString(lt.LaunchTemplateName), failingMarker) {
			return harness.AuthorizationFailure()
		}
		return nil
	})
	if w.mgr, err = harness.StartManager(w.env.Config, w.env.Envtest.WebhookInstallOptions, app.Options{
		AWS: &faulty, MaxConcurrentUpgrades: 5, Workers: 5, CloudChecks: false,
	}); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	data, err := w.cloud.Boundaries(w.cloud.AMIs[0])
	if err != nil {
		return err
	}
	return harness.SetBoundaries(ctx, w.admin, atScale(data))
}

func (w *world) stop() {
	if w.mgr != nil {
		_ = w.mgr.Stop()
	}
	_ = w.env.Stop()
}

// group is the example tenant group (tenant-short.yaml) as name in ns.
func group(ns, name string, minSize, maxSize int64) (*v1alpha1.InstanceGroup, error) {
	ig, err := install.ExampleTenantGroup()
	if err != nil {
		return nil, err
	}
	ig.Namespace, ig.Name = ns, name
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = minSize, maxSize
	return ig, nil
}

// create creates the namespace and the groups.
func (w *world) create(ctx context.Context, ns string, groups []*v1alpha1.InstanceGroup) error {
	if err := w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, ig := range groups {
		if err := w.admin.Create(ctx, ig); err != nil {
			return fmt.Errorf("creating %s/%s: %w", ig.Namespace, ig.Name, err)
		}
	}
	return nil
}

// waitAll waits until every group of ns satisfies done (n groups in all).
func (w *world) waitAll(ctx context.Context, ns string, n int, timeout time.Duration, what string, done func(*v1alpha1.InstanceGroup) bool) error {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.InstanceGroupList{}
		if err := w.admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		ok := 0
		for i := range list.Items {
			if done(&list.Items[i]) {
				ok++
			} else {
				last = fmt.Sprintf("%s: %s %s", list.Items[i].Name, list.Items[i].Status.CurrentState, readyMessage(&list.Items[i]))
			}
		}
		return ok == n && len(list.Items) == n, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %d groups of %s not there after %s (e.g. %s): %w", what, n, ns, timeout, last, err)
	}
	return nil
}

// ready: Ready for its current spec, every instance on the latest version.
func ready(ig *v1alpha1.InstanceGroup) bool {
	return ig.Status.ObservedGeneration == ig.Generation && ig.Status.CurrentState == v1alpha1.StateReady &&
		ig.Status.NodesTotal > 0 && ig.Status.NodesUpdated == ig.Status.NodesTotal
}

func readyMessage(ig *v1alpha1.InstanceGroup) string {
	for _, c := range ig.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Message
		}
	}
	return ""
}

// benchAWSCalls measures the AWS call figures: the 10×2 workload and the
// rotation overhead in one world, the 200-group fleet (idle and one failing
// group) in another. Calls are counted by the manager's own metrics
// (instance_manager_aws_api_calls_total).
func benchAWSCalls(report func(string, float64, string)) error {
	w, err := newWorld(workloadJoin)
	if err != nil {
		return err
	}
	err = benchWorkload(w, report)
	if err == nil {
		err = benchRotationOverhead(w, report)
	}
	w.stop()
	if err != nil {
		return err
	}
	if w, err = newWorld(0); err != nil {
		return err
	}
	defer w.stop()
	return benchFleet(w, report)
}

// benchWorkload: 10 groups of 2 nodes created at once, left idle, every
// group's image changed (20 instances replaced), every group deleted; the
// calls and the time of each phase.
func benchWorkload(w *world, report func(string, float64, string)) error {
	ctx := context.Background()
	const ns = "bench-10x2"
	var groups []*v1alpha1.InstanceGroup
	for i := range workloadGroups {
		ig, err := group(ns, fmt.Sprintf("group-%d", i), 2, 4)
		if err != nil {
			return err
		}
		groups = append(groups, ig)
	}
	before, start := awsp.CallCounts(), time.Now()
	if err := w.create(ctx, ns, groups); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, workloadGroups, 10*time.Minute, "create", ready); err != nil {
		return err
	}
	created := awsp.CallCounts()
	report("aws_calls_10x2_create", created.Since(before).Total(), "calls")
	report("seconds_10x2_create", time.Since(start).Seconds(), "s")
	fmt.Printf("  (aws_calls_10x2_create, by operation) %v\n", created.Since(before))

	time.Sleep(workloadIdle)
	idle := awsp.CallCounts().Since(created)
	report("aws_calls_10x2_idle_per_group_hour", idle.Total()/float64(workloadGroups)/workloadIdle.Hours(), "calls/group/h")
	fmt.Printf("  (aws_calls_10x2_idle over %s, by operation) %v\n", workloadIdle, idle)

	// Every group's image: the boundary ConfigMap's default image changed.
	data, err := w.cloud.Boundaries(w.cloud.AMIs[1])
	if err != nil {
		return err
	}
	atScale(data)
	before, start = awsp.CallCounts(), time.Now()
	if err := harness.WriteBoundaries(ctx, w.admin, data); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, workloadGroups, 15*time.Minute, "rotation", func(ig *v1alpha1.InstanceGroup) bool {
		return ready(ig) && ig.Spec.EKS.Configuration.Image == w.cloud.AMIs[1] && ig.Status.LatestTemplateVersion == "2"
	}); err != nil {
		return err
	}
	rotated := awsp.CallCounts()
	report("aws_calls_10x2_rotate", rotated.Since(before).Total(), "calls")
	report("seconds_10x2_rotate", time.Since(start).Seconds(), "s")
	fmt.Printf("  (aws_calls_10x2_rotate, by operation) %v\n", rotated.Since(before))

	before, start = rotated, time.Now()
	if err := w.admin.DeleteAllOf(ctx, &v1alpha1.InstanceGroup{}, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, 0, 10*time.Minute, "delete", func(*v1alpha1.InstanceGroup) bool { return false }); err != nil {
		return err
	}
	deleted := awsp.CallCounts()
	report("aws_calls_10x2_delete", deleted.Since(before).Total(), "calls")
	report("seconds_10x2_delete", time.Since(start).Seconds(), "s")
	fmt.Printf("  (aws_calls_10x2_delete, by operation) %v\n", deleted.Since(before))
	return nil
}

// benchRotationOverhead: a rollingUpdate of 20 nodes, maxUnavailable 5,
// nodes joining rotationJoin after their instance starts; the time over the
// ideal, 4 batches × the join delay.
func benchRotationOverhead(w *world, report func(string, float64, string)) error {
	ctx := context.Background()
	const ns, nodes, batch = "bench-rotation", 20, 5
	w.env.Bridge.SetJoinDelay(rotationJoin)
	ig, err := group(ns, "rotation", nodes, nodes)
	if err != nil {
		return err
	}
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate,
		RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(batch))}}
	if err := w.create(ctx, ns, []*v1alpha1.InstanceGroup{ig}); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, 1, 10*time.Minute, "rotation group", ready); err != nil {
		return err
	}
	cur := &v1alpha1.InstanceGroup{}
	if err := w.admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
		return err
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.EKS.Configuration.InstanceType = "t3.small"
	start := time.Now()
	if err := w.admin.Patch(ctx, cur, patch); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, 1, 15*time.Minute, "rotation of 20 nodes", func(ig *v1alpha1.InstanceGroup) bool {
		return ready(ig) && ig.Status.LatestTemplateVersion == "2" && ig.Status.NodesTotal == nodes
	}); err != nil {
		return err
	}
	took := time.Since(start)
	ideal := time.Duration(nodes/batch) * rotationJoin
	report("rotation_overhead_ratio", took.Seconds()/ideal.Seconds(), "ratio")
	report("rotation_seconds_20_nodes", took.Seconds(), "s")
	return nil
}

// benchFleet: fleetGroups groups created (1 node each), then idle with one
// group failing persistently beside them; the calls per group created, per
// idle group and hour, and per minute of the failing group.
func benchFleet(w *world, report func(string, float64, string)) error {
	ctx := context.Background()
	const ns = "bench-fleet"
	var groups []*v1alpha1.InstanceGroup
	for i := range fleetGroups {
		ig, err := group(ns, fmt.Sprintf("group-%d", i), 1, 2)
		if err != nil {
			return err
		}
		groups = append(groups, ig)
	}
	before := awsp.CallCounts()
	if err := w.create(ctx, ns, groups); err != nil {
		return err
	}
	if err := w.waitAll(ctx, ns, fleetGroups, 20*time.Minute, "fleet create", ready); err != nil {
		return err
	}
	created := awsp.CallCounts().Since(before)
	report("aws_calls_per_group_create", created.Total()/float64(fleetGroups), "calls/group")
	fmt.Printf("  (aws_calls_fleet_create, %d groups, by operation) %v\n", fleetGroups, created)

	failing, err := group("bench-failing", "failing", 1, 2)
	if err != nil {
		return err
	}
	if err := w.create(ctx, "bench-failing", []*v1alpha1.InstanceGroup{failing}); err != nil {
		return err
	}
	time.Sleep(failingWarmup)
	before = awsp.CallCounts()
	time.Sleep(fleetIdle)
	calls := awsp.CallCounts().Since(before)
	var failed float64
	for _, op := range failingOps {
		failed += calls[op]
	}
	report("aws_calls_per_group_hour_steady", calls.Without(failingOps...).Total()/float64(fleetGroups)/fleetIdle.Hours(), "calls/group/h")
	report("aws_calls_per_min_failing_group", failed/fleetIdle.Minutes(), "calls/min")
	fmt.Printf("  (aws_calls_fleet_idle, %d groups and one failing over %s, by operation) %v\n", fleetGroups, fleetIdle, calls)
	return nil
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
