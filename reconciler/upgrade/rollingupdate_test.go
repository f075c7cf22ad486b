package upgrade

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// fakeGroup is an Auto Scaling group as the rolling update sees it: its
// sizes, instances and nodes, and what the strategy asked of it. It is
// the narrowest fake of the cloud: a terminate without decrement launches
// an up-to-date replacement of the same weight, one with a decrement
// lowers the desired capacity by the instance's weight, a scale-out
// launches up-to-date instances of weight 1 (or newWeight).
type fakeGroup struct {
	t                    *testing.T
	min, max, desired    int
	instances            []providers.Instance
	newWeight            int
	next                 int
	terminated           []string // instance ids, "+d" when decremented
	refuseDecrementAtMin bool     // answer a decrement at minSize as AWS does
}

func (g *fakeGroup) add(id string, weight int, upToDate bool) {
	g.instances = append(g.instances, providers.Instance{ID: id, ProviderID: "aws:///us-west-2a/" + id, LifecycleState: "InService",
		Healthy: true, UpToDate: upToDate, Weight: weight})
}

func (g *fakeGroup) launch(weight int) {
	g.next++
	g.add(fmt.Sprintf("i-new%d", g.next), weight, true)
}

func (g *fakeGroup) find(id string) int {
	for i, in := range g.instances {
		if in.ID == id {
			return i
		}
	}
	g.t.Fatalf("no instance %s", id)
	return -1
}

func (g *fakeGroup) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, decrement bool) error {
	i := g.find(id)
	w := g.instances[i].Units()
	g.instances = append(g.instances[:i], g.instances[i+1:]...)
	if decrement {
		g.desired -= w
		g.terminated = append(g.terminated, id+"+d")
		return nil
	}
	g.terminated = append(g.terminated, id)
	g.launch(w)
	return nil
}

func (g *fakeGroup) SetDesiredCapacity(_ context.Context, _ *v1alpha1.InstanceGroup, desired int) error {
	g.desired = desired
	g.fill()
	return nil
}

// fill launches instances until the group holds its desired capacity.
func (g *fakeGroup) fill() {
	for providers.Capacity(g.instances, nil) < g.desired {
		g.launch(max(g.newWeight, 1))
	}
}

func (g *fakeGroup) observation() *providers.Observation {
	return &providers.Observation{Min: g.min, Max: g.max, Desired: g.desired, Instances: append([]providers.Instance(nil), g.instances...)}
}

// rollout runs a RollingUpdate against a fakeGroup with nodes in a fake
// API server; every instance's node is Ready unless notReady names it.
type rollout struct {
	t      *testing.T
	ig     *v1alpha1.InstanceGroup
	group  *fakeGroup
	kube   client.Client
	strat  *RollingUpdate
	events *events.FakeRecorder
	// notReady are instance ids whose nodes are NotReady.
	notReady map[string]bool
	// maxUnavailableSeen is the most capacity units ever unavailable
	// (not in service with a Ready, schedulable node) at a step, over the
	// group's desired capacity at that step.
	maxUnavailableSeen int
}

func newRollout(t *testing.T, ru *v1alpha1.RollingUpdateStrategy, g *fakeGroup) *rollout {
	t.Helper()
	if g.t == nil {
		g.t = t
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec: v1alpha1.InstanceGroupSpec{Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: ru}}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	rec := events.NewFakeRecorder(1000)
	r := &rollout{t: t, ig: ig, group: g, kube: kube, events: rec, notReady: map[string]bool{}}
	r.strat = &RollingUpdate{
		Drainer:  &Drainer{Kube: kubefake.NewSimpleClientset(), Client: kube, Timeout: time.Minute, Step: time.Second, Now: time.Now},
		Recorder: rec, Client: kube,
	}
	return r
}

// nodes makes sure every instance has a node (Ready unless notReady) and
// returns them by provider id, as the reconciler does.
func (r *rollout) nodes() map[string]*corev1.Node {
	ctx := context.Background()
	out := map[string]*corev1.Node{}
	for _, in := range r.group.instances {
		n := &corev1.Node{}
		err := r.kube.Get(ctx, client.ObjectKey{Name: in.ID}, n)
		if err != nil {
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.ID}, Spec: corev1.NodeSpec{ProviderID: in.ProviderID}}
			if err := r.kube.Create(ctx, n); err != nil {
				r.t.Fatal(err)
			}
		}
		status := corev1.ConditionTrue
		if r.notReady[in.ID] {
			status = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		out[in.ProviderID] = n
	}
	return out
}

// step runs one Step and records how much capacity was unavailable.
func (r *rollout) step() Progress {
	r.t.Helper()
	nodes := r.nodes()
	unavailable := 0
	for _, in := range r.group.instances {
		n := nodes[in.ProviderID]
		if n == nil || n.Spec.Unschedulable || r.notReady[in.ID] {
			unavailable += in.Units()
		}
	}
	// Capacity below what the group held before the rollout counts as
	// unavailable too (an instance terminated with a decrement).
	unavailable += max(0, r.baseline()-providers.Capacity(r.group.instances, nil))
	r.maxUnavailableSeen = max(r.maxUnavailableSeen, unavailable)
	p, err := r.strat.Step(context.Background(), r.ig, r.group.observation(), nodes, r.group)
	if err != nil {
		r.t.Fatalf("step: %v", err)
	}
	return p
}

// baseline is the desired capacity the surge accounting must return to:
// what the test says others want.
func (r *rollout) baseline() int {
	if b := r.ig.Status.SurgeBaseCapacity; b > 0 {
		return b
	}
	return r.group.desired
}

// run steps until the rollout is done (at most n steps).
func (r *rollout) run(n int) []string {
	r.t.Helper()
	var messages []string
	for range n {
		p := r.step()
		messages = append(messages, p.Message)
		if p.Done {
			return messages
		}
	}
	r.t.Fatalf("not done after %d steps: %s", n, strings.Join(messages, "\n"))
	return nil
}

func TestWeightedGroupRotatesInCapacityUnits(t *testing.T) {
	// Weights 1 and 2: desired 6 units held by two instances of weight 2
	// and two of weight 1. Counting instances (4 < 6) would wait for ever.
	g := &fakeGroup{min: 6, max: 8, desired: 6}
	g.add("i-a", 2, false)
	g.add("i-b", 2, false)
	g.add("i-c", 1, false)
	g.add("i-d", 1, false)
	r := newRollout(t, &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}, g)
	r.run(40)
	for _, in := range g.instances {
		if !in.UpToDate {
			t.Errorf("instance %s not rotated", in.ID)
		}
	}
	if len(g.terminated) != 4 {
		t.Errorf("terminated %v, want each of the 4 drifted instances once", g.terminated)
	}
	if r.maxUnavailableSeen > 2 {
		t.Errorf("up to %d capacity units unavailable at once, maxUnavailable is 2 units", r.maxUnavailableSeen)
	}
	if g.desired != 6 {
		t.Errorf("desired capacity %d after the rollout, want 6", g.desired)
	}
}

func TestABatchTakesOneInstanceHeavierThanMaxUnavailable(t *testing.T) {
	// maxUnavailable 1 unit, instances of weight 2: one at a time, or the
	// rollout would never start.
	g := &fakeGroup{min: 4, max: 6, desired: 4}
	g.add("i-a", 2, false)
	g.add("i-b", 2, false)
	r := newRollout(t, &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, g)
	r.run(40)
	if len(g.terminated) != 2 || r.maxUnavailableSeen > 2 {
		t.Errorf("terminated %v with up to %d units unavailable; want both, one at a time", g.terminated, r.maxUnavailableSeen)
	}
}
