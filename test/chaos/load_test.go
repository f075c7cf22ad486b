package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Settings of TestLoad.
const (
	// defaultLoadGroups is how many groups the tenants create;
	// IM_CHAOS_LOAD_GROUPS overrides it. The issue asks for 500: on the
	// project's 2-core machine, shared, the manager's 5 workers bring 65 to
	// 75 new groups a minute to Ready, so 500 take about 7 minutes to
	// converge and 6 to delete, over the 4 minutes `make test` gives this
	// test; 150 (3 per tenant) take under 3.
	defaultLoadGroups = 150
	defaultLoadReason = "150 by default, not the issue's 500: 500 take about 13 minutes on a 2-core machine (half of it deleting them), " +
		"over this test's 4-minute share of make test; IM_CHAOS_LOAD_GROUPS=500 make chaos runs them"
	// loadTenants is how many tenants (namespaces, each its own user)
	// create them at once.
	loadTenants = 50
	// loadCreateWindow is how long the tenants take to create their
	// groups, all together.
	loadCreateWindow = 30 * time.Second
)

// TestLoad has loadTenants tenants, each its own user in its own
// namespace, create defaultLoadGroups InstanceGroups (no instances: the
// controller's work per group is the same, the emulators' much smaller)
// at once, through the webhooks, while the admin changes the boundary
// ConfigMap twice (a new image, then a new default tag). Every group ends
// Ready with the last ConfigMap's effective spec: its boundaries-hash is
// the last ConfigMap's, its spec has the image and tag. The manager runs
// as its own process, as in its pod, and its resident memory (VmRSS),
// sampled every 500ms, stays under the chart's memory limit.
func TestLoad(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	n := defaultLoadGroups
	if s := os.Getenv("IM_CHAOS_LOAD_GROUPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < loadTenants {
			t.Fatalf("IM_CHAOS_LOAD_GROUPS=%q: want a number of groups, at least %d (one per tenant)", s, loadTenants)
		}
		n = v
	} else {
		fmt.Println("groups:", defaultLoadReason)
	}
	// Waits scale with the groups: about 75 a minute converge or go.
	wait := 3*time.Minute + time.Duration(n)*600*time.Millisecond
	limit, err := chartMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// The product's defaults but for a shorter poll of converging groups,
	// so that the test does not wait for them.
	mgr := newManagerProcess(t, environment.AWSEndpoint, "--poll-interval=1s",
		"--failure-backoff-max=10s", "--gc-period=1h", "--gc-grace=1h")
	if err := mgr.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("end of the manager log (%s):\n%s", mgr.logPath, tail(mgr.logPath, 40))
		}
	}()
	rss := startRSSSampler(mgr)
	defer rss.finish()

	data := []map[string]string{cloud.Boundaries(cloud.AMIs[0], 5), cloud.Boundaries(cloud.AMIs[1], 5), cloud.Boundaries(cloud.AMIs[1], 5)}
	data[2]["defaults"] = strings.Replace(data[2]["defaults"], "value: a-default-value", "value: load-2", 1)
	if err := harness.SetBoundaries(ctx, admin, data[0]); err != nil {
		t.Fatal(err)
	}
	var namespaces, keys []string
	tenants := make([]client.Client, loadTenants)
	for i := 0; i < loadTenants; i++ {
		ns := fmt.Sprintf("chaos-load-%02d", i)
		namespaces = append(namespaces, ns)
		ensureNamespace(t, ns)
		tenants[i] = tenantClient(t, ns, fmt.Sprintf("load-tenant-%02d", i))
	}
	perTenant := make([][]string, loadTenants)
	for i := 0; i < n; i++ {
		ns := namespaces[i%loadTenants]
		name := fmt.Sprintf("g%03d", i)
		perTenant[i%loadTenants] = append(perTenant[i%loadTenants], name)
		keys = append(keys, ns+"/"+name)
	}
	defer func() {
		// Deleting takes longer than converging here: each group's
		// instances are drained and the Auto Scaling group, launch template
		// and role go one call at a time against a moto that holds every
		// earlier chaos test's (terminated) instances. Measured: 2m17s for
		// 150 groups alone, 2m58s and over 4m33s (45 left) after the rest
		// of the suite; the budget is twice the converging rate, and the
		// time is a FIGURE so that a slowdown shows.
		start := time.Now()
		deleteGroups(t, namespaces, keys, 3*time.Minute+time.Duration(n)*1200*time.Millisecond)
		took := time.Since(start)
		t.Logf("%d groups deleted in %s", n, took.Round(time.Second))
		figure(t, "load_delete_seconds", int(took.Seconds()))
	}()

	// The tenants create their groups at once, each at a steady pace over
	// loadCreateWindow (staggered), so that the admin's two ConfigMap
	// changes, after a third and after two thirds of the creates, land
	// while groups are still being created. That holds by construction,
	// however fast or slow the machine: the last create to start waits
	// until the second change is written.
	var created, begun, retries atomic.Int64
	secondWritten := make(chan struct{})
	var releaseLast sync.Once
	defer releaseLast.Do(func() { close(secondWritten) })
	var wg sync.WaitGroup
	errs := make(chan error, n)
	createStart := time.Now()
	for i := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			every := loadCreateWindow / time.Duration(len(perTenant[i]))
			time.Sleep(every * time.Duration(i) / loadTenants)
			for j, name := range perTenant[i] {
				if j > 0 {
					time.Sleep(every)
				}
				ig := shortGroup(namespaces[i], name, "t3.medium")
				ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 1
				if begun.Add(1) == int64(n) {
					<-secondWritten
				}
				if err := createRetrying(ctx, tenants[i], ig, &retries); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		}()
	}
	duringCreates := 0
	for change := 1; change <= 2; change++ {
		for created.Load() < int64(n*change/3) && len(errs) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		// Written as an admin does, without waiting for the manager to
		// load it: the second change may come before the first is loaded.
		before := created.Load()
		if err := writeBoundariesRetrying(ctx, data[change], &retries); err != nil {
			t.Fatalf("ConfigMap change %d: %v", change, err)
		}
		after := created.Load()
		if after < int64(n) {
			duringCreates++
		}
		if change == 2 {
			releaseLast.Do(func() { close(secondWritten) })
		}
		t.Logf("ConfigMap change %d written between create %d and %d of %d", change, before, after, n)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d tenants created %d groups in %s (%d transient refusals retried)", loadTenants, n, time.Since(createStart).Round(time.Second), retries.Load())

	cfg, err := boundaries.Parse(data[2])
	if err != nil {
		t.Fatal(err)
	}
	hash := cfg.Hash(false)
	pending := waitGroups(ctx, namespaces, keys, wait, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		if h := ig.Annotations[v1alpha1.AnnotationBoundariesHash]; h != hash {
			return false, "boundaries hash " + h
		}
		c := ig.Spec.EKS.Configuration
		if c.Image != cloud.AMIs[1] {
			return false, "spec image " + c.Image
		}
		if !hasTag(c.Tags, "a-default-tag", "load-2") {
			return false, fmt.Sprintf("spec tags %v", c.Tags)
		}
		return ready(ig)
	})
	converged := time.Since(started)
	peak := rss.finish()
	if len(pending) > 0 {
		t.Errorf("%d of %d groups not Ready with the last ConfigMap's spec:\n  %s", len(pending), n, summarize(pending, 10))
	}
	if peak >= limit {
		t.Errorf("the manager's peak resident memory was %d MiB, at or over the chart's limit of %d MiB", peak>>20, limit>>20)
	}
	figure(t, "load_groups", n)
	figure(t, "load_tenants", loadTenants)
	figure(t, "load_groups_converged", fmt.Sprintf("%d/%d", n-len(pending), n))
	if duringCreates != 2 {
		t.Errorf("%d of the 2 ConfigMap changes were written while groups were being created; the test did not load the manager as meant", duringCreates)
	}
	figure(t, "load_configmap_changes_during_creates", duringCreates)
	figure(t, "load_admission_retries", retries.Load())
	figure(t, "load_seconds", int(converged.Seconds()))
	figure(t, "manager_peak_rss_mib", peak>>20)
	figure(t, "chart_memory_limit_mib", limit>>20)
}

func hasTag(tags []map[string]string, key, value string) bool {
	for _, tg := range tags {
		if tg["key"] == key && tg["value"] == value {
			return true
		}
	}
	return false
}

// createRetrying creates ig as the tenant would, retrying (up to 10
// times, a second apart) a refusal for a transient reason: a webhook or
// the API server timing out under the load.
func createRetrying(ctx context.Context, c client.Client, ig *v1alpha1.InstanceGroup, retries *atomic.Int64) error {
	var err error
	for attempt := 1; attempt <= 10; attempt++ {
		if err = c.Create(ctx, ig.DeepCopy()); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		retries.Add(1)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("creating %s: refused 10 times, last: %w", key(ig), err)
}

// writeBoundariesRetrying writes the boundary ConfigMap, retrying (up to
// 10 times, a second apart) a refusal for a transient reason.
func writeBoundariesRetrying(ctx context.Context, data map[string]string, retries *atomic.Int64) error {
	var err error
	for attempt := 1; attempt <= 10; attempt++ {
		if err = harness.WriteBoundaries(ctx, admin, data); err == nil {
			return nil
		}
		retries.Add(1)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("refused 10 times, last: %w", err)
}

// chartMemoryLimit reads resources.limits.memory from the chart's
// values.yaml, in bytes.
func chartMemoryLimit() (int64, error) {
	path := filepath.Join(harness.RepoRoot(), "charts", "instance-manager", "values.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var values struct {
		Resources struct {
			Limits struct {
				Memory string `json:"memory"`
			} `json:"limits"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	q, err := resource.ParseQuantity(values.Resources.Limits.Memory)
	if err != nil {
		return 0, fmt.Errorf("%s: resources.limits.memory %q: %w", path, values.Resources.Limits.Memory, err)
	}
	return q.Value(), nil
}

// rssSampler reads the manager process's VmRSS from /proc every 500ms and
// keeps the peak.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startRSSSampler(m *managerProcess) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			if v, err := vmRSS(m.pid()); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peak, in bytes.
func (s *rssSampler) finish() int64 {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return s.peak.Load()
}

// vmRSS is the resident set size of process pid, in bytes
// (/proc/<pid>/status, VmRSS, which the kernel gives in kB).
func vmRSS(pid int) (int64, error) {
	if pid == 0 {
		return 0, fmt.Errorf("no process")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
