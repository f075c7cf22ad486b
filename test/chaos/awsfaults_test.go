package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/faults"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Settings of TestAWSFaults.
const (
	// faultRate is the share of the manager's AWS calls that fail.
	faultRate = 0.2
	// defaultFaultGroups is how many groups are created, rotated and
	// deleted; IM_CHAOS_GROUPS overrides it. The issue asks for 50: on the
	// project's 2-core machine 50 take about 8 minutes (about 2 to create,
	// 3.5 to roll, 1.5 to delete, with 20 workers), over the 4 minutes
	// `make test` gives this test; 25 take about half.
	defaultFaultGroups  = 25
	defaultGroupsReason = "25 by default, not the issue's 50: 50 take about 8 minutes on a 2-core machine, " +
		"over this test's 4-minute share of make test; IM_CHAOS_GROUPS=50 make chaos runs them"
	// faultTenants is how many namespaces the groups are spread over.
	faultTenants = 5
	// scarceType is the instance type EC2 has no capacity for.
	scarceType = "c5.xlarge"
)

// TestAWSFaults creates groups, rolls them to a new image and deletes
// them while a fifth of the manager's AWS calls fail (throttling, server
// errors, connection resets before and after AWS acted, slow answers), and
// one group's instance type persistently has no capacity. Every other
// group converges at each step; no Auto Scaling group, launch template,
// role or instance profile is ever duplicated (moto is read every two
// seconds); nothing is left after the deletes.
func TestAWSFaults(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	n := defaultFaultGroups
	if s := os.Getenv("IM_CHAOS_GROUPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("IM_CHAOS_GROUPS=%q is not a positive number", s)
		}
		n = v
	} else {
		fmt.Println("groups:", defaultGroupsReason)
	}
	started := time.Now()

	// Besides random faults: every instance profile the manager creates is
	// unusable for 5 s (IAM propagation), so each group's first
	// CreateAutoScalingGroup is refused as AWS refuses it.
	proxy, err := faults.Start(faults.Options{Target: environment.AWSEndpoint, Seed: seed, SlowDelay: time.Second, IAMPropagation: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	awsCfg := environment.AWS.Copy()
	awsCfg.BaseEndpoint = &proxy.URL
	awsCfg.RetryMaxAttempts = 0 // the product's retryer decides (8 attempts, adaptive)
	mgr, err := harness.StartManager(environment.Config, environment.Envtest.WebhookInstallOptions, app.Options{
		AWS: &awsCfg, Workers: 20, DrainTimeout: 15 * time.Second,
		PollInterval: time.Second, ResyncInterval: 30 * time.Second,
		// A group whose reconcile failed is retried after at most 20s
		// (default 5m), so the test's waits stay short.
		FailureBackoffMax: 20 * time.Second,
		CloudChecks:       true,
		// The garbage collector does not run within the test: whatever
		// is left was left by the create, rotate and delete paths.
		GCPeriod: time.Hour, GCGrace: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Stop() }()
	if err := harness.SetBoundaries(ctx, admin, wavesBoundaries(cloud.AMIs[0])); err != nil {
		t.Fatal(err)
	}
	// Later tests write boundaries without waves (which ends any rollout);
	// so does this one when it ends.
	t.Cleanup(func() {
		_ = harness.SetBoundaries(context.Background(), admin, cloud.Boundaries(cloud.AMIs[0], maxConcurrent))
	})

	var namespaces, keys []string
	var groups []*v1alpha1.InstanceGroup
	iamOwners := &owners{}
	for i := 0; i < faultTenants; i++ {
		ns := fmt.Sprintf("chaos-aws-%d", i)
		namespaces = append(namespaces, ns)
		ensureNamespace(t, ns)
	}
	for i := 0; i < n; i++ {
		ig := shortGroup(namespaces[i%faultTenants], fmt.Sprintf("g%02d", i), "t3.medium")
		groups = append(groups, ig)
		keys = append(keys, key(ig))
		iamOwners.add(ig.Namespace, ig.Name)
	}
	scarce := shortGroup(namespaces[0], "scarce", scarceType)
	iamOwners.add(scarce.Namespace, scarce.Name)

	watch := watchInventory(environment.AWS, iamOwners, 2*time.Second)
	proxy.SetRate(faultRate)
	// No capacity for the scarce type, the way AWS shows it: the Auto
	// Scaling group's launches fail as scaling activities (StatusCode
	// Failed, "We currently do not have sufficient … capacity"); no API
	// call fails.
	if err := environment.SetInsufficientCapacity(ctx, scarceType); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = environment.SetInsufficientCapacity(context.Background()) }()

	// Create, as tenants would: an admission refused for a transient
	// reason (the webhooks' own AWS checks met a fault) is retried.
	var admissionRetries atomic.Int64
	createAll(t, append([]*v1alpha1.InstanceGroup{scarce}, groups...), &admissionRetries)
	t.Logf("created %d groups in %s", n+1, time.Since(started).Round(time.Second))

	stepStart := time.Now()
	pending := waitGroups(ctx, namespaces, keys, 4*time.Minute, func(k string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		return ready(ig)
	})
	if len(pending) > 0 {
		t.Fatalf("%d of %d groups not Ready after creation under faults (%s):\n  %s\nfaults: %s", len(pending), n, time.Since(stepStart).Round(time.Second), summarize(pending, 10), proxy.Stats())
	}
	t.Logf("all %d groups Ready %s after the creates; faults so far: %s", n, time.Since(stepStart).Round(time.Second), proxy.Stats())

	// The group whose instance type has no capacity says so, and stays
	// out of the way of the others.
	pending = waitGroups(ctx, namespaces, []string{key(scarce)}, 2*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		c := conditionOf(ig, v1alpha1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == "LaunchFailed" && strings.Contains(c.Message, "InsufficientInstanceCapacity") {
			return true, ""
		}
		_, why := ready(ig)
		return false, why
	})
	// It must say so within the wait: the group is short of its desired
	// capacity, so each reconcile reads its latest failed scaling activity.
	reported := 1
	if len(pending) > 0 {
		reported = 0
		t.Errorf("the group without capacity does not report InsufficientInstanceCapacity in its Degraded condition: %s", pending[0])
		dumpGroups(t, scarce.Namespace, iamOwners)
	}
	figure(t, "scarce_group_reports_insufficient_capacity", fmt.Sprintf("%d/1", reported))

	// Roll every group to a new image: the admin changes the default, and
	// the change rolls out in waves (canary namespace, half of the rest,
	// the rest), each judged: transient faults must not halt it.
	stepStart = time.Now()
	boundaryRetries := setBoundariesRetrying(t, wavesBoundaries(cloud.AMIs[1]))
	newImage := cloud.AMIs[1]
	var inv inventory
	var invErr error
	pending = waitGroups(ctx, namespaces, keys, 8*time.Minute, func(k string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if k == keys[0] { // once per poll
			inv, invErr = readInventory(ctx, environment.AWS, iamOwners)
		}
		if ig == nil {
			return false, "not found"
		}
		if img := ig.Spec.EKS.Configuration.Image; img != newImage {
			return false, "spec image " + img
		}
		if ok, why := ready(ig); !ok {
			return false, why
		}
		if invErr != nil {
			return false, invErr.Error()
		}
		live := inv.instances[ig.Status.ActiveScalingGroupName]
		if len(live) != 1 || live[0].image != newImage {
			return false, fmt.Sprintf("instances of %s: %v", ig.Status.ActiveScalingGroupName, live)
		}
		return true, ""
	})
	if len(pending) > 0 {
		t.Fatalf("%d of %d groups not rolled to %s under faults (%s):\n  %s\nfaults: %s", len(pending), n, newImage, time.Since(stepStart).Round(time.Second), summarize(pending, 10), proxy.Stats())
	}
	t.Logf("all %d groups rolled to the new image in %s; faults so far: %s", n, time.Since(stepStart).Round(time.Second), proxy.Stats())
	rolled := harness.WaitRolloutRecord(t, admin, boundaries.Revision(wavesBoundaries(newImage)), record.PhaseComplete, 2*time.Minute)
	if rolled.Halt != nil {
		t.Errorf("the rollout under transient faults halted: %s", rolled.Halt.Reason)
	}
	figure(t, "rollout_waves_completed_under_faults", fmt.Sprintf("%d/%d", len(rolled.Waves), len(rolled.Waves)))

	// The same rollout, with a persistent fault on one canary group: its
	// launch template can no longer be written (an IAM policy denying
	// ec2:CreateLaunchTemplateVersion on it). The rollout halts on that
	// group, and no group outside the canary wave moves.
	broken := groups[1] // the first group of the canary namespace
	brokenTemplate := ownership.Name(ownership.LimitLaunchTemplate, cloud.Cluster, broken.Namespace, broken.Name)
	removeRule := proxy.AddRule(faults.Rule{
		Service: "ec2", Operations: []string{"CreateLaunchTemplateVersion"},
		Match: func(c *faults.Call) bool { return c.ParamEquals("LaunchTemplateName", brokenTemplate) },
		Error: faults.APIError{Code: "UnauthorizedOperation", Status: http.StatusForbidden,
			Message: "You are not authorized to perform this operation."},
	})
	stepStart = time.Now()
	boundaryRetries += setBoundariesRetrying(t, wavesBoundaries(cloud.AMIs[2]))
	halted := harness.WaitRolloutRecord(t, admin, boundaries.Revision(wavesBoundaries(cloud.AMIs[2])), record.PhaseHalted, 5*time.Minute)
	removeRule()
	if halted.Halt == nil || !strings.Contains(halted.Halt.Reason+" "+halted.Message, key(broken)) {
		t.Errorf("the rollout halted, but not on %s: %+v (%s)", key(broken), halted.Halt, halted.Message)
	}
	if len(halted.Waves) > 1 && len(halted.Waves[1].Groups) > 0 {
		t.Errorf("a wave after the canary started: %+v", halted.Waves[1])
	}
	t.Logf("halted on %s in %s: %s", key(broken), time.Since(stepStart).Round(time.Second), halted.Message)
	figure(t, "rollout_halted_on_persistent_fault", fmt.Sprintf("%d/1", map[bool]int{true: 1}[halted.Halt != nil]))

	// Delete every group, the one without capacity too, while the rollout
	// is halted.
	stepStart = time.Now()
	for _, ig := range append([]*v1alpha1.InstanceGroup{scarce}, groups...) {
		if err := admin.Delete(ctx, ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", key(ig), err)
		}
	}
	pending = waitGroups(ctx, namespaces, append([]string{key(scarce)}, keys...), 4*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return true, ""
		}
		_, why := ready(ig)
		return false, "still there: " + why
	})
	if len(pending) > 0 {
		t.Fatalf("%d groups not deleted under faults (%s):\n  %s\nfaults: %s", len(pending), time.Since(stepStart).Round(time.Second), summarize(pending, 10), proxy.Stats())
	}
	t.Logf("all groups deleted in %s", time.Since(stepStart).Round(time.Second))
	proxy.SetRate(0)

	duplicates, reads := watch.finish()
	final, err := readInventory(ctx, environment.AWS, iamOwners)
	if err != nil {
		t.Fatal(err)
	}
	leaked := final.leftovers()
	stats := proxy.Stats()
	t.Logf("faults: %s", stats)
	t.Logf("inventories read during the run: %d", reads)
	figure(t, "faults_injected", stats.Total())
	figure(t, "aws_calls", stats.Calls)
	figure(t, "groups_converged", fmt.Sprintf("%d/%d", n, n))
	figure(t, "resources_duplicated", len(duplicates))
	figure(t, "resources_leaked", len(leaked))
	figure(t, "admission_retries", admissionRetries.Load()+int64(boundaryRetries))
	figure(t, "aws_faults_seconds", int(time.Since(started).Seconds()))
	if len(duplicates) > 0 {
		t.Errorf("resources duplicated during the run:\n  %s", summarize(duplicates, 20))
	}
	if len(leaked) > 0 {
		t.Errorf("left in AWS after every group was deleted:\n  %s", summarize(leaked, 20))
	}
}

// createAll creates the groups, 8 at a time, retrying a create the API
// server refused for a transient reason (up to 10 times each).
func createAll(t *testing.T, groups []*v1alpha1.InstanceGroup, retries *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, len(groups))
	for _, ig := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var err error
			for attempt := 1; attempt <= 10; attempt++ {
				err = admin.Create(ctx, ig.DeepCopy())
				if err == nil || apierrors.IsAlreadyExists(err) {
					return
				}
				retries.Add(1)
				time.Sleep(time.Second)
			}
			errs <- fmt.Errorf("creating %s: refused 10 times, last: %w", key(ig), err)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// maxConcurrent is TestAWSFaults' cap on groups rotating at once.
const maxConcurrent = 25

// wavesBoundaries are the cloud's boundaries for image under a rollout
// policy: the canary namespace chaos-aws-1, then half of the groups left,
// then the rest; a short soak; a group not Ready within 4 minutes of its
// move fails its wave.
func wavesBoundaries(image string) map[string]string {
	d := cloud.Boundaries(image, maxConcurrent)
	d["rollout"] = fmt.Sprintf(`maxConcurrentUpgrades: %d
soak: 5s
failure:
  startupTimeout: 4m
waves:
- name: canary
  namespaces: [chaos-aws-1]
- name: early
  percent: 50
`, maxConcurrent)
	return d
}

// setBoundariesRetrying writes the boundary ConfigMap, retrying up to 10
// times a write its webhook refused for a transient reason (its AWS
// checks met a fault); it returns the number of retries.
func setBoundariesRetrying(t *testing.T, data map[string]string) int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := harness.SetBoundaries(context.Background(), admin, data)
		if err == nil {
			return attempt - 1
		}
		if attempt == 10 {
			t.Fatalf("the boundary ConfigMap was refused 10 times under faults: %v", err)
		}
		t.Logf("ConfigMap write %d refused (retrying): %v", attempt, err)
		time.Sleep(time.Second)
	}
}
