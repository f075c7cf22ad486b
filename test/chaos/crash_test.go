package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/faults"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Settings of TestCrashes.
const (
	crashNamespace = "chaos-crash"
	crashGroups    = 4
	// crashGroupSize is each group's minSize (desired capacity); maxSize is
	// one more, room for a surge instance.
	crashGroupSize = 3
	// minCrashKills is the fewest kills the run makes. It is reached by
	// construction, whatever the seed and the machine's load: every phase
	// kills at least once, and rotations are added until the count, with
	// the delete phase's kill, reaches it.
	minCrashKills = 20
)

// downSampler watches the groups' nodes every 200ms while on: a node that
// is not Ready, or cordoned, is down; more than maxUnavailable down in one
// group is a violation.
type downSampler struct {
	mu         sync.Mutex
	on         bool
	phase      string
	violations []string
	maxDown    int
	samples    int
	stop       chan struct{}
	done       chan struct{}
}

func startDownSampler(maxUnavailable int) *downSampler {
	s := &downSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			s.mu.Lock()
			on, phase := s.on, s.phase
			s.mu.Unlock()
			if !on {
				continue
			}
			nodes := &corev1.NodeList{}
			if err := admin.List(context.Background(), nodes, client.MatchingLabels{v1alpha1.LabelInstanceGroupNamespace: crashNamespace}); err != nil {
				continue
			}
			available := map[string]int{}
			for _, n := range nodes.Items {
				if !n.Spec.Unschedulable && nodeReady(&n) {
					available[n.Labels[v1alpha1.LabelInstanceGroup]]++
				}
			}
			s.mu.Lock()
			s.samples++
			for i := 0; i < crashGroups; i++ {
				g := fmt.Sprintf("g%d", i)
				down := crashGroupSize - available[g]
				s.maxDown = max(s.maxDown, down)
				if down > maxUnavailable {
					s.violations = append(s.violations, fmt.Sprintf("%s %s: %d of %d nodes down at %s", phase, g, down, crashGroupSize, time.Now().Format("15:04:05.000")))
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *downSampler) watch(on bool, phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.phase = on, phase
}

func (s *downSampler) finish() (violations []string, maxDown, samples int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.violations, s.maxDown, s.samples
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestCrashes kills the manager (SIGKILL, its own process: the binary
// built from main.go) at points chosen by the seed while groups are
// created, rolled to a new image, rolled again with a surge, rolled again
// until the kills reach minCrashKills, and deleted, starting it again
// after each kill. After
// every phase all groups converge; no group ever has more than
// maxUnavailable (1) nodes down or cordoned; no instance is asked to be
// terminated twice; nothing is duplicated; nothing is left.
func TestCrashes(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	started := time.Now()
	rnd := rand.New(rand.NewSource(seed))

	var termMu sync.Mutex
	terminations := map[string]int{}
	proxy, err := faults.Start(faults.Options{Target: environment.AWSEndpoint, OnCall: func(c *faults.Call, _ string) {
		if c.Service == "autoscaling" && c.Operation == "TerminateInstanceInAutoScalingGroup" {
			termMu.Lock()
			terminations[c.Params.Get("InstanceId")]++
			termMu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	mgr := newManagerProcess(t, proxy.URL, "--poll-interval=1s", "--resync-interval=30s", "--drain-timeout=15s",
		"--failure-backoff-max=10s", "--gc-period=1h", "--gc-grace=1h", "--max-concurrent-upgrades=5", "--workers=5")
	if err := mgr.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("end of the last manager log (%s):\n%s", mgr.logPath, tail(mgr.logPath, 40))
		}
	}()
	if err := harness.SetBoundaries(ctx, admin, cloud.Boundaries(cloud.AMIs[0], 5)); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, crashNamespace)
	iamOwners := &owners{}
	var groups []*v1alpha1.InstanceGroup
	var keys []string
	for i := 0; i < crashGroups; i++ {
		ig := shortGroup(crashNamespace, fmt.Sprintf("g%d", i), "t3.medium")
		ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = crashGroupSize, crashGroupSize+1
		ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate,
			RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
		groups = append(groups, ig)
		keys = append(keys, key(ig))
		iamOwners.add(ig.Namespace, ig.Name)
	}
	inventory := watchInventory(environment.AWS, iamOwners, 2*time.Second)
	sampler := startDownSampler(1)

	// kills counts every kill; killsInside those made while their phase
	// had not converged yet (a figure: how many land inside depends on
	// the load, not on the code).
	kills, killsInside := 0, 0
	var killLog []string
	// phase runs action, then kills the manager after seeded delays in
	// [minDelay, maxDelay) (counted from when it is ready again) until
	// done holds or maxKills were made, then waits for done. The first
	// kill is made whether or not the phase has converged, so that every
	// phase adds at least one kill to the count.
	phase := func(name string, maxKills int, minDelay, maxDelay time.Duration, action func() error, done func() (bool, string)) {
		t.Helper()
		if err := action(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := 0; k < maxKills; k++ {
			delay := minDelay + time.Duration(rnd.Int63n(int64(maxDelay-minDelay)))
			time.Sleep(delay)
			converged, _ := done()
			if converged && k > 0 {
				break
			}
			pid := mgr.kill()
			kills++
			where := "inside"
			if converged {
				where = "after convergence"
			} else {
				killsInside++
			}
			killLog = append(killLog, fmt.Sprintf("%s+%s", name, delay.Round(10*time.Millisecond)))
			t.Logf("kill %d: %s, %s after the manager was ready (pid %d, %s)", kills, name, delay.Round(10*time.Millisecond), pid, where)
			if err := mgr.start(ctx); err != nil {
				t.Fatalf("restart after kill %d: %v", kills, err)
			}
		}
		deadline := time.Now().Add(4 * time.Minute)
		for {
			ok, why := done()
			if ok {
				break
			}
			if time.Now().After(deadline) {
				dumpGroups(t, crashNamespace, iamOwners)
				t.Fatalf("%s: not converged 4 minutes after the last kill: %s", name, why)
			}
			time.Sleep(time.Second)
		}
		t.Logf("%s converged (%d kills so far, %s)", name, kills, time.Since(started).Round(time.Second))
	}

	groupsReady := func(image string) func() (bool, string) {
		return func() (bool, string) {
			inv, err := readInventory(ctx, environment.AWS, iamOwners)
			if err != nil {
				return false, err.Error()
			}
			pending := waitGroups(ctx, []string{crashNamespace}, keys, 0, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
				if ig == nil {
					return false, "not found"
				}
				if img := ig.Spec.EKS.Configuration.Image; img != image {
					return false, "spec image " + img
				}
				if ok, why := ready(ig); !ok {
					return false, why
				}
				live := inv.instances[ig.Status.ActiveScalingGroupName]
				if len(live) != crashGroupSize {
					return false, fmt.Sprintf("%d instances", len(live))
				}
				for _, in := range live {
					if in.image != image {
						return false, "instance " + in.id + " on " + in.image
					}
				}
				return true, ""
			})
			return len(pending) == 0, strings.Join(pending, "; ")
		}
	}
	setImage := func(image string) func() error {
		return func() error {
			return harness.SetBoundaries(ctx, admin, cloud.Boundaries(image, 5))
		}
	}

	phase("create", 6, 300*time.Millisecond, 3*time.Second, func() error {
		for _, ig := range groups {
			if err := admin.Create(ctx, ig.DeepCopy()); err != nil {
				return err
			}
		}
		return nil
	}, groupsReady(cloud.AMIs[0]))

	sampler.watch(true, "rotation")
	phase("rotation", 7, 300*time.Millisecond, 3*time.Second, setImage(cloud.AMIs[1]), groupsReady(cloud.AMIs[1]))

	sampler.watch(true, "surge")
	phase("surge", 7, 300*time.Millisecond, 3*time.Second, func() error {
		for _, ig := range groups {
			cur := &v1alpha1.InstanceGroup{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
				return err
			}
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}
			if err := admin.Patch(ctx, cur, patch); err != nil {
				return err
			}
		}
		return setImage(cloud.AMIs[2])()
	}, groupsReady(cloud.AMIs[2]))

	// More rotations while the kills are short of the minimum (the delete
	// phase makes at least one more). Each adds at least one kill, so the
	// loop ends after at most minCrashKills rotations; it takes the most
	// when phases converge between two kills, as they do under load.
	rotations := 2
	for extra := 0; kills < minCrashKills-1; extra++ {
		rotations++
		image := cloud.AMIs[extra%3]
		phase(fmt.Sprintf("rotation-%d", rotations), 7, 300*time.Millisecond, 3*time.Second, setImage(image), groupsReady(image))
	}
	sampler.watch(false, "")

	phase("delete", 5, 200*time.Millisecond, 2*time.Second, func() error {
		for _, ig := range groups {
			if err := admin.Delete(ctx, ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}, func() (bool, string) {
		pending := waitGroups(ctx, []string{crashNamespace}, keys, 0, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
			return ig == nil, "still there"
		})
		return len(pending) == 0, strings.Join(pending, "; ")
	})

	violations, maxDown, samples := sampler.finish()
	duplicates, _ := inventory.finish()
	final, err := readInventory(ctx, environment.AWS, iamOwners)
	if err != nil {
		t.Fatal(err)
	}
	leaked := final.leftovers()
	var twice []string
	termMu.Lock()
	attempts := 0
	for id, n := range terminations {
		attempts += n
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s (%d times)", id, n))
		}
	}
	termMu.Unlock()
	sort.Strings(twice)
	t.Logf("kill points (seed %d): %s", seed, strings.Join(killLog, ", "))
	t.Logf("node samples during rotations: %d, most nodes of one group down at once: %d", samples, maxDown)
	fmt.Printf("crash kill points (seed %d): %s\n", seed, strings.Join(killLog, ", "))
	figure(t, "crash_kills", kills)
	figure(t, "crash_kills_before_convergence", killsInside)
	figure(t, "crash_rotations", rotations)
	figure(t, "max_unavailable_exceeded", len(violations))
	figure(t, "max_nodes_down_in_a_group", maxDown)
	figure(t, "instance_terminations", attempts)
	figure(t, "instances_terminated_twice", len(twice))
	figure(t, "resources_duplicated", len(duplicates))
	figure(t, "resources_leaked", len(leaked))
	figure(t, "crash_seconds", int(time.Since(started).Seconds()))
	if kills < minCrashKills {
		t.Errorf("%d kills, want at least %d", kills, minCrashKills)
	}
	if len(violations) > 0 {
		t.Errorf("more than maxUnavailable (1) nodes down (samples every 200ms):\n  %s", summarize(violations, 20))
	}
	if len(twice) > 0 {
		t.Errorf("instances asked to be terminated more than once: %s", strings.Join(twice, ", "))
	}
	if len(duplicates) > 0 {
		t.Errorf("resources duplicated:\n  %s", summarize(duplicates, 20))
	}
	if len(leaked) > 0 {
		t.Errorf("left in AWS after the groups were deleted:\n  %s", summarize(leaked, 20))
	}
}

// dumpGroups logs what a stuck group shows: its status and conditions,
// its Auto Scaling group's instances, its nodes.
func dumpGroups(t *testing.T, namespace string, iamOwners *owners) {
	ctx := context.Background()
	list := &v1alpha1.InstanceGroupList{}
	if err := admin.List(ctx, list, client.InNamespace(namespace)); err != nil {
		t.Logf("listing groups: %v", err)
		return
	}
	inv, _ := readInventory(ctx, environment.AWS, iamOwners)
	nodes := &corev1.NodeList{}
	_ = admin.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelInstanceGroupNamespace: namespace})
	for _, ig := range list.Items {
		st := ig.Status
		t.Logf("%s: generation %d observed %d, state %s, surgeBaseCapacity %d, nodes %d/%d updated, template version %s",
			ig.Name, ig.Generation, st.ObservedGeneration, st.CurrentState, st.SurgeBaseCapacity, st.NodesUpdated, st.NodesTotal, st.LatestTemplateVersion)
		for _, c := range st.Conditions {
			t.Logf("  condition %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		for _, in := range inv.instances[st.ActiveScalingGroupName] {
			t.Logf("  instance %s image %s", in.id, in.image)
		}
		for _, n := range nodes.Items {
			if n.Labels[v1alpha1.LabelInstanceGroup] == ig.Name {
				t.Logf("  node %s ready %v unschedulable %v annotations %v", n.Name, nodeReady(&n), n.Spec.Unschedulable, n.Annotations)
			}
		}
	}
}
