package termination

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
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

type fixedWaits []providers.TerminationWait

func (f fixedWaits) TerminationWaits() []providers.TerminationWait { return f }

// fakeActions records CompleteLifecycleAction and heartbeat calls; with
// gone set it answers as Auto Scaling does for an instance with no pending
// action.
type fakeActions struct {
	mu         sync.Mutex
	completed  []string
	heartbeats []string
	gone       bool
}

func (f *fakeActions) CompleteLifecycleAction(_ context.Context, in *autoscaling.CompleteLifecycleActionInput, _ ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = append(f.completed, *in.InstanceId+" "+*in.LifecycleHookName+" "+*in.LifecycleActionResult)
	if f.gone {
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with instance ID " + *in.InstanceId}
	}
	return &autoscaling.CompleteLifecycleActionOutput{}, nil
}

func (f *fakeActions) RecordLifecycleActionHeartbeat(_ context.Context, in *autoscaling.RecordLifecycleActionHeartbeatInput, _ ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, *in.InstanceId)
	return &autoscaling.RecordLifecycleActionHeartbeatOutput{}, nil
}

func (f *fakeActions) calls() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.completed...), append([]string(nil), f.heartbeats...)
}

const providerID = "aws:///us-west-2a/i-1"

func TestController(t *testing.T) {
	group := types.NamespacedName{Namespace: "team", Name: "web"}
	node := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotations}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, tc := range []struct {
		name       string
		node       *corev1.Node
		outcome    fakeeviction.Outcome
		gone       bool
		advance    time.Duration // the clock moves this much after the first pass
		complete   bool          // the action is completed
		evicted    int
		heartbeats int
		events     []string // reasons, in order
		noPod      bool     // the node holds no pod (drained before)
		accepted   bool     // handed over by Accept (an EventBridge event, no zone), not listed
	}{
		{name: "no node: completed at once", complete: true},
		{name: "a node in service: cordoned, drained through the Eviction API, then completed", node: node(nil), outcome: fakeeviction.Delete,
			complete: true, evicted: 1, events: []string{EventDrainStarted, EventDrained}},
		{name: "a node the rotation drained: completed without a drain of its own", complete: true, noPod: true,
			node: node(map[string]string{drain.AnnotationDrainStarted: "2026-11-26T12:00:00Z"})},
		{name: "evictions refused: never completed, the wait heartbeated", node: node(nil), outcome: fakeeviction.Refuse,
			advance: 4 * time.Minute, complete: false, evicted: 1, heartbeats: 1, events: []string{EventDrainStarted, EventDrainBlocked}},
		{name: "no action pending (completed elsewhere): done, not retried", gone: true, complete: true},
		{name: "accepted from the queue, not listed yet: the node is found by instance id, drained, completed", node: node(nil), outcome: fakeeviction.Delete,
			accepted: true, complete: true, evicted: 1, events: []string{EventDrainStarted, EventDrained}},
		// Review 2026-11-29 N16 (docs/autoscaling.md, warm-pool instances).
		{name: "a warm-pool instance from the queue (Warmed:Terminating:Wait, never listed, no node): completed at once",
			accepted: true, complete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			objs := []client.Object{&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: group.Namespace, Name: group.Name}}}
			var kubeObjs []runtime.Object
			if !tc.noPod {
				kubeObjs = append(kubeObjs, pod)
			}
			if tc.node != nil {
				objs = append(objs, tc.node.DeepCopy())
				kubeObjs = append(kubeObjs, tc.node.DeepCopy())
			}
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
			srv := fakeeviction.New(clock, func(*corev1.Pod) fakeeviction.Outcome { return tc.outcome }, kubeObjs...)
			drainer := &drain.Drainer{Kube: srv.Kube, Client: kube, Timeout: time.Minute, Step: time.Second, Now: clock}
			drains := &drain.Drains{Drainer: drainer, Max: 2, Interval: time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = drains.Start(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			aws := &fakeActions{gone: tc.gone}
			rec := events.NewFakeRecorder(10)
			listed := fixedWaits{{Group: group, ScalingGroup: "team-web", InstanceID: "i-1", ProviderID: providerID}}
			var waits fixedWaits
			if !tc.accepted {
				waits = listed
			}
			c := &Controller{Waits: waits, AWS: aws, Client: kube, Drainer: drainer, Drains: drains, Recorder: rec, Heartbeat: 10 * time.Minute, Now: clock}
			if tc.accepted {
				c.Accept(providers.TerminationWait{Group: group, ScalingGroup: "team-web", InstanceID: "i-1"})
			}

			c.Pass(context.Background())
			mu.Lock()
			now = now.Add(tc.advance)
			mu.Unlock()
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				c.Pass(context.Background())
				if completed, _ := aws.calls(); len(completed) > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			c.Pass(context.Background()) // a pass after the end changes nothing
			completed, beats := aws.calls()
			if want := map[bool]int{true: 1}[tc.complete]; len(completed) != want {
				t.Errorf("CompleteLifecycleAction calls %q, want %d", completed, want)
			} else if want == 1 && completed[0] != "i-1 instance-manager-drain CONTINUE" {
				t.Errorf("completed %q, want i-1 instance-manager-drain CONTINUE", completed[0])
			}
			if len(beats) != tc.heartbeats {
				t.Errorf("heartbeats %q, want %d", beats, tc.heartbeats)
			}
			if got := srv.Evictions("apps/web-1"); (tc.evicted == 0) != (got == 0) {
				t.Errorf("evictions %d, want %d", got, tc.evicted)
			}
			if tc.node != nil {
				cur := &corev1.Node{}
				if err := kube.Get(context.Background(), client.ObjectKey{Name: "n1"}, cur); err != nil {
					t.Fatal(err)
				}
				if !cur.Spec.Unschedulable && len(tc.events) > 0 {
					t.Errorf("node not cordoned")
				}
			}
			close(rec.Events)
			var reasons []string
			for e := range rec.Events {
				reasons = append(reasons, strings.Fields(e)[1])
			}
			if strings.Join(reasons, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %q, want reasons %q", reasons, tc.events)
			}
		})
	}
}
