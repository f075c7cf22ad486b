package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Settings of TestSpotInterruptionsWhileGroupsWait.
const (
	// spotGroupSize is each waiting group's size; at most
	// spotGroupSize-1 of its instances are interrupted, so that its app
	// keeps a schedulable node.
	spotGroupSize = 3
	// spotWarnings are sent, each for another instance of a waiting group.
	spotWarnings = 6
	// spotKills is how many times the manager is killed among the warnings.
	spotKills = 2
	// spotNotice is EC2's notice before a reclaim: an interrupted node
	// must be drained within it.
	spotNotice = 2 * time.Minute
	// spotSettle is how long the watch goes on after the last drain, the
	// waiting groups passing again and again.
	spotSettle = 10 * time.Second
)

// The groups of the test, one a namespace (each its own app): the holder
// rotates and keeps the only upgrade slot; the others are drifted and
// wait in the state named.
var spotGroups = []struct{ namespace, state string }{
	{"chaos-spot-holder", "holds the slot"},
	{"chaos-spot-slot-a", "waiting for an upgrade slot"},
	{"chaos-spot-slot-b", "waiting for an upgrade slot"},
	{"chaos-spot-frozen", "waiting to rotate"},
	{"chaos-spot-held", v1alpha1.ConditionReady + " " + "BoundariesStale"},
}

// TestSpotInterruptionsWhileGroupsWait sends spot interruption warnings
// (EventBridge to the SQS interruption queue, as EC2 does) for instances
// of drifted groups that may not rotate: two wait for the only upgrade
// slot (maxConcurrentUpgrades 1, held by a group whose rotation a
// PodDisruptionBudget blocks), one is outside its namespace's maintenance
// (a freeze), one is held by the admission gate (its re-admission under a
// quota it exceeds is refused), while the manager is killed and started
// again between warnings. Which instances, in which order, how far apart
// and where the kills land come from the seed. Every pass of a waiting
// group gives back the drains its rotation started; none may touch an
// interruption's (review N1). Checked throughout (samples every 250ms):
// every interrupted node is drained within EC2's two-minute notice and
// stays cordoned by the interruption (its instance neither went nor
// survived the handler's release delay), no node of a waiting group is
// cordoned by anyone else, each app (4 replicas, minAvailable 3) keeps 3
// Ready pods and no pod is left on a gone Node; the groups still wait at
// the end; the suite's drain audit counts no undrained pod.
func TestSpotInterruptionsWhileGroupsWait(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	started := time.Now()
	rnd := rand.New(rand.NewSource(seed))
	queue := harness.InterruptionQueue(t, environment.AWS, "chaos-spot")
	mgr := newManagerProcess(t, environment.AWSEndpoint, "--interruption-queue="+queue, "--poll-interval=1s", "--resync-interval=30s",
		"--drain-timeout=15s", "--failure-backoff-max=10s", "--gc-period=1h", "--gc-grace=1h", "--workers=5")
	g.Expect(mgr.start(ctx)).To(Succeed())
	defer func() {
		if t.Failed() {
			t.Logf("end of the last manager log (%s):\n%s", mgr.logPath, tail(mgr.logPath, 40))
		}
	}()

	groups, apps := spotSetUp(t)
	defer spotTearDown(t, groups, apps)
	waiting := groups[1:]
	var namespaces []string
	for _, ig := range waiting {
		namespaces = append(namespaces, ig.Namespace)
	}
	watch := startSpotWatch(namespaces)
	kills, evicted := spotWarn(t, rnd, mgr, watch, waiting)

	// Every interrupted node drained within the notice; then the watch
	// goes on while the groups pass again.
	last := time.Now()
	for len(watch.undrained()) > 0 && time.Since(last) < spotNotice {
		time.Sleep(harness.PollInterval)
	}
	time.Sleep(spotSettle)
	res := watch.finish()
	states := spotStates(ctx, groups)

	var maxDrain time.Duration
	for _, d := range res.drainTimes {
		maxDrain = max(maxDrain, d)
	}
	minReady := 1 << 30
	for _, n := range res.minReady {
		minReady = min(minReady, n)
	}
	t.Logf("seed %d: %d samples; drain times %v; fewest Ready pods by namespace %v", seed, res.samples, res.drainTimes, res.minReady)
	figure(t, "spot_warnings_sent", spotWarnings)
	figure(t, "spot_app_pods_on_interrupted_nodes", evicted)
	figure(t, "spot_drains_completed", fmt.Sprintf("%d/%d", len(res.drainTimes), spotWarnings))
	figure(t, "spot_max_seconds_to_drain", int(maxDrain.Round(time.Second).Seconds()))
	figure(t, "spot_min_ready_pods", fmt.Sprintf("%d (budget 3 of 4)", minReady))
	figure(t, "spot_manager_kills", kills)
	figure(t, "spot_violations", len(res.violations))
	figure(t, "spot_seconds", int(time.Since(started).Seconds()))

	if undrained := watch.undrained(); len(undrained) > 0 {
		t.Errorf("interrupted nodes not drained within the %s notice: %v", spotNotice, undrained)
	}
	for n, d := range res.drainTimes {
		if d > spotNotice {
			t.Errorf("node %s drained %s after its warning, past the %s notice", n, d.Round(time.Second), spotNotice)
		}
	}
	if len(res.violations) > 0 {
		t.Errorf("drains of waiting groups wrong:\n  %s", summarize(res.violations, 20))
	}
	if minReady < 3 {
		t.Errorf("an app fell below its PodDisruptionBudget (minAvailable 3 of 4): fewest Ready pods by namespace %v", res.minReady)
	}
	if len(res.orphans) > 0 {
		t.Errorf("pods bound to a Node that is gone (undrained): %v", res.orphans)
	}
	if len(states) > 0 {
		t.Errorf("groups no longer in the state the test put them in:\n  %s", summarize(states, 10))
	}
}

// spotSetUp builds the test's world: the boundaries (only upgrade slot;
// a freeze for the frozen and held namespaces), the groups, Ready with
// their nodes, and their apps; the holder drifts first and takes the
// slot; then a new image drifts every group, and another, with a quota
// the held group exceeds, makes the admission gate hold it. It returns the groups in
// spotGroups' order and their apps.
func spotSetUp(t *testing.T) ([]*v1alpha1.InstanceGroup, []*appsv1.Deployment) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	frozen := []string{spotGroups[3].namespace, spotGroups[4].namespace}
	g.Expect(harness.SetBoundaries(ctx, admin, spotBoundaries(cloud.AMIs[0], frozen, ""))).To(Succeed())
	var groups []*v1alpha1.InstanceGroup
	for i, sg := range spotGroups {
		ensureNamespace(t, sg.namespace)
		ig := harness.ShortGroup(sg.namespace, "g", spotGroupSize, spotGroupSize+1)
		if i == 0 {
			ig = harness.ShortGroup(sg.namespace, "g", 1, 2)
		}
		g.Expect(admin.Create(ctx, ig)).To(Succeed())
		groups = append(groups, ig)
	}
	// apps deploys through TeamApp, which needs only the admin's client.
	apps := &harness.Suite{Admin: admin}
	var deployments []*appsv1.Deployment
	for i, ig := range groups {
		harness.WaitReady(t, admin, ig, 3*time.Minute)
		want := int(ig.Spec.EKS.MinSize)
		g.Eventually(func() int { return harness.Available(harness.GroupNodes(t, admin, ig)) }, 2*time.Minute, time.Second).Should(Equal(want), key(ig))
		if i == 0 {
			// One replica its budget never lets go: the holder's
			// rotation cannot drain its node and keeps the slot.
			deployments = append(deployments, apps.TeamApp(t, ig.Namespace, 1, intstr.FromInt32(1)))
			continue
		}
		deployments = append(deployments, apps.TeamApp(t, ig.Namespace, 4, intstr.FromInt32(3)))
	}

	holder := &v1alpha1.InstanceGroup{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(groups[0]), holder)).To(Succeed())
	patch := client.MergeFrom(holder.DeepCopy())
	holder.Spec.EKS.Configuration.InstanceType = "m5.large"
	g.Expect(admin.Patch(ctx, holder, patch)).To(Succeed())
	g.Eventually(func() string { return spotState(ctx, groups[0]) }, 2*time.Minute, time.Second).Should(Equal(spotGroups[0].state), "the holder takes the only slot")

	g.Expect(harness.SetBoundaries(ctx, admin, spotBoundaries(cloud.AMIs[1], frozen, ""))).To(Succeed())
	for i, ig := range groups[1:] {
		want := spotGroups[i+1].state
		if i+1 == 4 {
			want = "waiting to rotate" // frozen until the quota below
		}
		g.Eventually(func() string { return spotState(ctx, ig) }, 2*time.Minute, time.Second).Should(Equal(want), key(ig))
	}
	// A quota alone is no new revision: another image makes the fan-out
	// re-admit every group, the held one refused.
	g.Expect(harness.SetBoundaries(ctx, admin, spotBoundaries(cloud.AMIs[2], frozen, spotGroups[4].namespace))).To(Succeed())
	g.Eventually(func() string { return spotState(ctx, groups[4]) }, 2*time.Minute, time.Second).Should(Equal(spotGroups[4].state), key(groups[4]))
	return groups, deployments
}

// spotBoundaries are the cloud's boundaries with image, one upgrade slot,
// a freeze (yesterday to tomorrow) for the frozen namespaces and, when
// overQuota is set, a quota of maxSize 2 in that namespace.
func spotBoundaries(image string, frozen []string, overQuota string) map[string]string {
	data := cloud.Boundaries(image, 1)
	now := time.Now().UTC()
	rollout := "maxConcurrentUpgrades: 1\nnamespaceMaintenance:\n"
	for _, ns := range frozen {
		rollout += fmt.Sprintf("  %s:\n    freezes: [{from: %q, to: %q}]\n", ns,
			now.AddDate(0, 0, -1).Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly))
	}
	data["rollout"] = rollout
	if overQuota != "" {
		data["quotas"] = strings.TrimRight(data["quotas"], "\n") + "\nnamespaces:\n  " + overQuota + ": {maxSize: 2}\n"
	}
	return data
}

// spotState says what state ig is in, in spotGroups' words: "holds the
// slot" (Upgrading True), the Upgrading condition's waiting message
// without its details (with no node updated), or "Ready <reason>" when the
// admission gate holds it; anything else as seen.
func spotState(ctx context.Context, ig *v1alpha1.InstanceGroup) string {
	cur := &v1alpha1.InstanceGroup{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
		return err.Error()
	}
	if c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == "BoundariesStale" {
		return v1alpha1.ConditionReady + " " + c.Reason
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
	switch {
	case c == nil:
		return "no Upgrading condition; state " + cur.Status.CurrentState
	case c.Status == metav1.ConditionTrue:
		return "holds the slot"
	case cur.Status.NodesUpdated > 0:
		return fmt.Sprintf("%d nodes updated: %s", cur.Status.NodesUpdated, c.Message)
	}
	for _, sg := range spotGroups[1:] {
		if strings.Contains(c.Message, sg.state) {
			return sg.state
		}
	}
	return c.Reason + ": " + c.Message
}

// spotStates lists the groups no longer in their state.
func spotStates(ctx context.Context, groups []*v1alpha1.InstanceGroup) []string {
	var out []string
	for i, ig := range groups {
		if got := spotState(ctx, ig); got != spotGroups[i].state {
			out = append(out, fmt.Sprintf("%s: want %q, got %q", key(ig), spotGroups[i].state, got))
		}
	}
	return out
}

// spotWarn sends spotWarnings warnings, each for an instance of a waiting
// group chosen by rnd (at most spotGroupSize-1 a group; spotVictim picks
// the node), rnd's delays apart, and kills and restarts the manager after
// spotKills of them chosen by rnd. It returns the kills made and the app
// pods the interrupted nodes ran at their warnings.
func spotWarn(t *testing.T, rnd *rand.Rand, mgr *managerProcess, watch *spotWatch, waiting []*v1alpha1.InstanceGroup) (kills, pods int) {
	t.Helper()
	ctx := context.Background()
	killAfter := map[int]bool{}
	for _, i := range rnd.Perm(spotWarnings)[:spotKills] {
		killAfter[i] = true
	}
	perGroup, warned := map[string]int{}, map[string]bool{}
	var plan []string
	for i := 0; i < spotWarnings; i++ {
		var open []*v1alpha1.InstanceGroup
		for _, ig := range waiting {
			if perGroup[key(ig)] < spotGroupSize-1 {
				open = append(open, ig)
			}
		}
		ig := open[rnd.Intn(len(open))]
		node, onIt := spotVictim(t, rnd, ig, warned)
		id := providers.InstanceID(node.Spec.ProviderID)
		if err := harness.PutSpotInterruptionWarning(ctx, environment.AWS, id); err != nil {
			t.Fatal(err)
		}
		watch.warn(node.Name, time.Now())
		perGroup[key(ig)]++
		warned[node.Name] = true
		pods += onIt
		plan = append(plan, fmt.Sprintf("%s/%s (%d pods)", key(ig), id, onIt))
		time.Sleep(time.Duration(200+rnd.Intn(2800)) * time.Millisecond)
		if killAfter[i] {
			pid := mgr.kill()
			kills++
			plan = append(plan, "kill")
			t.Logf("kill %d after warning %d (pid %d)", kills, i+1, pid)
			if err := mgr.start(ctx); err != nil {
				t.Fatalf("restart after kill %d: %v", kills, err)
			}
		}
	}
	t.Logf("warnings and kills (seed %d): %s", seed, strings.Join(plan, ", "))
	return kills, pods
}

// spotVictim picks by rnd a node of ig not warned yet, among those running
// app pods when one does, and returns it with the app pods on it.
func spotVictim(t *testing.T, rnd *rand.Rand, ig *v1alpha1.InstanceGroup, warned map[string]bool) (corev1.Node, int) {
	t.Helper()
	nodes := harness.GroupNodes(t, admin, ig)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(ig.Namespace), client.MatchingLabels{"app": "team-app"}); err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			on[p.Spec.NodeName]++
		}
	}
	var with, without []corev1.Node
	for _, n := range nodes {
		switch {
		case warned[n.Name]:
		case on[n.Name] > 0:
			with = append(with, n)
		default:
			without = append(without, n)
		}
	}
	if len(with) == 0 {
		with = without
	}
	if len(with) == 0 {
		t.Fatalf("%s: no node left to interrupt", key(ig))
	}
	n := with[rnd.Intn(len(with))]
	return n, on[n.Name]
}

// spotTearDown removes the apps (their budgets would hold the groups'
// deletion drains) and the groups, and waits until they are gone.
func spotTearDown(t *testing.T, groups []*v1alpha1.InstanceGroup, apps []*appsv1.Deployment) {
	ctx := context.Background()
	for _, d := range apps {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name}}
		_ = client.IgnoreNotFound(admin.Delete(ctx, pdb))
		_ = client.IgnoreNotFound(admin.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}
	var namespaces, keys []string
	for _, ig := range groups {
		namespaces = append(namespaces, ig.Namespace)
		keys = append(keys, key(ig))
	}
	deleteGroups(t, namespaces, keys, 4*time.Minute)
}
