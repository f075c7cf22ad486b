package interruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// fakeOwners is a listing: Auto Scaling group name -> owner, instance id
// -> its wait.
type fakeOwners struct {
	groups    map[string]types.NamespacedName
	instances map[string]providers.TerminationWait
}

func (f fakeOwners) ScalingGroupOwner(name string) (types.NamespacedName, bool) {
	g, ok := f.groups[name]
	return g, ok
}

func (f fakeOwners) InstanceOwner(id string) (providers.TerminationWait, bool) {
	w, ok := f.instances[id]
	return w, ok
}

type fakeAcceptor struct {
	mu       sync.Mutex
	accepted []providers.TerminationWait
}

func (f *fakeAcceptor) Accept(w providers.TerminationWait) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = append(f.accepted, w)
}

var web = types.NamespacedName{Namespace: "team", Name: "web"}

// world is a handler over a fake cluster: InstanceGroup team/web, Node n1
// of instance i-1 (in web's Auto Scaling group team-web) with pod
// apps/web-1, and whatever extra objects a case adds.
type world struct {
	h      *Handler
	kube   client.Client
	srv    *fakeeviction.Server
	rec    *events.FakeRecorder
	accept *fakeAcceptor
}

func newWorld(t *testing.T, outcome fakeeviction.Outcome, extra ...client.Object) *world {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	objs := append([]client.Object{&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: web.Namespace, Name: web.Name}}, node.DeepCopy()}, extra...)
	kubeObjs := []runtime.Object{node.DeepCopy(), pod}
	for _, o := range extra {
		kubeObjs = append(kubeObjs, o.DeepCopyObject())
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	srv := fakeeviction.New(time.Now, func(*corev1.Pod) fakeeviction.Outcome { return outcome }, kubeObjs...)
	drainer := &drain.Drainer{Kube: srv.Kube, Client: kube, Timeout: time.Minute, Step: time.Second, Now: time.Now}
	drains := &drain.Drains{Drainer: drainer, Max: 2, Interval: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = drains.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	w := &world{kube: kube, srv: srv, rec: events.NewFakeRecorder(20), accept: &fakeAcceptor{}}
	w.h = &Handler{
		Owners: fakeOwners{groups: map[string]types.NamespacedName{"team-web": web},
			instances: map[string]providers.TerminationWait{"i-1": {Group: web, ScalingGroup: "team-web", InstanceID: "i-1"}, "i-9": {Group: web, ScalingGroup: "team-web", InstanceID: "i-9"}}},
		Terminations: w.accept, Client: kube, Drainer: drainer, Drains: drains, Recorder: w.rec,
	}
	return w
}

func (w *world) reasons() []string {
	var out []string
	for {
		select {
		case e := <-w.rec.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

func TestHandle(t *testing.T) {
	labelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{v1alpha1.LabelInstanceGroup: "web", v1alpha1.LabelInstanceGroupNamespace: "team"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-2"}}
	labelledGone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{v1alpha1.LabelInstanceGroup: "gone", v1alpha1.LabelInstanceGroupNamespace: "team"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-3"}}
	stranger := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n4"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-4"}}
	lifecycle := Event{Kind: KindLifecycle, InstanceID: "i-1", ScalingGroup: "team-web", Hook: "instance-manager-drain", Token: "tok",
		Transition: "autoscaling:EC2_INSTANCE_TERMINATING"}
	for _, tc := range []struct {
		name     string
		ev       Event
		want     Outcome
		accepted string   // the instance handed to the termination controller
		cordon   string   // the node that must end cordoned
		evicted  bool     // apps/web-1 (on n1) evicted after passes
		events   []string // reasons, Node's and group's
	}{
		{name: "lifecycle action of the drain hook on an owned group: handed over", ev: lifecycle, want: OutcomeHandedOver, accepted: "i-1"},
		{name: "lifecycle action of another hook: not ours to complete", ev: func() Event { e := lifecycle; e.Hook = "my-hook"; return e }(), want: OutcomeIgnored},
		{name: "lifecycle action on a group no InstanceGroup owns", ev: func() Event { e := lifecycle; e.ScalingGroup = "someone-else"; return e }(), want: OutcomeNotOurs},
		{name: "spot warning for a group's instance: cordoned and drained", ev: Event{Kind: KindSpot, InstanceID: "i-1", Action: "terminate"},
			want: OutcomeDraining, cordon: "n1", evicted: true, events: []string{EventDrainStarted, EventDrainStarted, EventDrained, EventDrained}},
		{name: "state change to shutting-down: drained", ev: Event{Kind: KindStateChange, InstanceID: "i-1", State: "shutting-down"},
			want: OutcomeDraining, cordon: "n1", evicted: true, events: []string{EventDrainStarted, EventDrainStarted, EventDrained, EventDrained}},
		{name: "state change to running: nothing", ev: Event{Kind: KindStateChange, InstanceID: "i-1", State: "running"}, want: OutcomeIgnored},
		{name: "spot warning for a node labelled with an existing group, not listed yet", ev: Event{Kind: KindSpot, InstanceID: "i-2", Action: "terminate"},
			want: OutcomeDraining, cordon: "n2", events: []string{EventDrainStarted, EventDrainStarted, EventDrained, EventDrained}},
		{name: "spot warning for a node labelled with a group that does not exist: untouched", ev: Event{Kind: KindSpot, InstanceID: "i-3"}, want: OutcomeNotOurs},
		{name: "spot warning for a node of no group: untouched", ev: Event{Kind: KindSpot, InstanceID: "i-4"}, want: OutcomeNotOurs},
		{name: "spot warning for an instance of no group and no node", ev: Event{Kind: KindSpot, InstanceID: "i-5"}, want: OutcomeNotOurs},
		{name: "spot warning for a group's instance without a Node", ev: Event{Kind: KindSpot, InstanceID: "i-9"}, want: OutcomeNoNode},
		{name: "rebalance recommendation: Events only", ev: Event{Kind: KindRebalance, InstanceID: "i-1"}, want: OutcomeEventOnly,
			events: []string{EventRebalance, EventRebalance}},
		{name: "rebalance recommendation for a stranger: nothing", ev: Event{Kind: KindRebalance, InstanceID: "i-4"}, want: OutcomeNotOurs},
		{name: "another detail-type", ev: Event{Kind: KindOther}, want: OutcomeIgnored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, fakeeviction.Delete, labelled, labelledGone, stranger)
			got, err := w.h.Handle(context.Background(), tc.ev)
			if err != nil || got != tc.want {
				t.Fatalf("Handle = %q, %v; want %q", got, err, tc.want)
			}
			deadline := time.Now().Add(5 * time.Second)
			for w.h.Tracked() > 0 && time.Now().Before(deadline) {
				w.h.Pass(context.Background())
				time.Sleep(5 * time.Millisecond)
			}
			if n := w.h.Tracked(); n != 0 {
				t.Errorf("%d drains still tracked after 5s", n)
			}
			var accepted []string
			for _, a := range w.accept.accepted {
				accepted = append(accepted, a.InstanceID+" "+a.Group.String()+" "+a.ScalingGroup+" "+a.Token)
			}
			if want := map[bool]string{true: tc.accepted + " team/web team-web tok"}[tc.accepted != ""]; strings.Join(accepted, ",") != want {
				t.Errorf("accepted %q, want %q", accepted, want)
			}
			for _, name := range []string{"n1", "n2", "n3", "n4"} {
				n := &corev1.Node{}
				if err := w.kube.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
					t.Fatal(err)
				}
				if n.Spec.Unschedulable != (name == tc.cordon) {
					t.Errorf("node %s unschedulable = %v", name, n.Spec.Unschedulable)
				}
			}
			if got := w.srv.Evictions("apps/web-1"); (got > 0) != tc.evicted {
				t.Errorf("evictions of apps/web-1: %d, want any: %v", got, tc.evicted)
			}
			if got := w.reasons(); strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %q, want %q", got, tc.events)
			}
		})
	}
}

func TestPassBlockedThenGone(t *testing.T) {
	w := newWorld(t, fakeeviction.Refuse)
	w.h.Drainer.Timeout = 0 // blocked at the first refusal
	if out, err := w.h.Handle(context.Background(), Event{Kind: KindSpot, InstanceID: "i-1", Action: "terminate"}); err != nil || out != OutcomeDraining {
		t.Fatalf("Handle = %q, %v", out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var reasons []string
	for time.Now().Before(deadline) && !strings.Contains(strings.Join(reasons, ","), EventDrainBlocked) {
		w.h.Pass(context.Background())
		reasons = append(reasons, w.reasons()...)
		time.Sleep(5 * time.Millisecond)
	}
	if want := []string{EventDrainStarted, EventDrainStarted, EventDrainBlocked, EventDrainBlocked}; strings.Join(reasons, ",") != strings.Join(want, ",") {
		t.Fatalf("events %q, want %q", reasons, want)
	}
	if w.h.Tracked() != 1 {
		t.Fatalf("a blocked drain must stay tracked")
	}
	for i := 0; i < 20; i++ { // still refused: told once only
		w.h.Pass(context.Background())
		time.Sleep(5 * time.Millisecond)
	}
	if got := w.reasons(); len(got) != 0 {
		t.Errorf("more events while blocked: %q", got)
	}
	if err := w.kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	w.h.Pass(context.Background())
	if w.h.Tracked() != 0 {
		t.Errorf("the drain of a deleted node is still tracked")
	}
	if got := w.h.Drains.Draining(web); len(got) != 0 {
		t.Errorf("drains still running for a deleted node: %q", got)
	}
}
