package instancegroup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

func TestPace(t *testing.T) {
	for _, tc := range []struct{ undrained, limit, fresh, want int }{
		{0, 1, 3, 1},
		{1, 1, 3, 0},
		{0, 2, 1, 1},
		{1, 3, 5, 2},
		{4, 3, 5, 0}, // more undrained than the limit (it was lowered): none
		{0, 3, 0, 0},
	} {
		if got := pace(tc.undrained, tc.limit, tc.fresh); got != tc.want {
			t.Errorf("pace(%d undrained, limit %d, %d fresh) = %d, want %d", tc.undrained, tc.limit, tc.fresh, got, tc.want)
		}
	}
}

// managedProgress: waiting for a slot as an eks group does; the slot is
// released only once nothing is replaced or updated.
func TestManagedProgress(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		obs                          providers.Observation
		wantDone, wantWait, wantFree bool
		wantMsg                      string
	}{
		{"steady", providers.Observation{Managed: true, Active: true}, true, false, true, ""},
		{"waiting for a slot", providers.Observation{Managed: true, Active: true, WaitingForSlot: true, Message: "replacing EKS node group a with b"},
			false, true, false, "waiting for an upgrade slot: 1 group(s) rotating (team/other); then replacing EKS node group a with b"},
		{"replacing", providers.Observation{Managed: true, Active: true, Updating: true, Retiring: []string{"a"}, Message: "draining"}, false, false, false, "draining"},
		{"version update", providers.Observation{Managed: true, Updating: true}, false, false, false, ""},
		{"retiring gone, still updating", providers.Observation{Managed: true, Updating: true}, false, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slots := &fakeslots.Slots{Max: func() int { return 1 }}
			if ok, _ := slots.Acquire(context.Background(), client.ObjectKey{Namespace: "team", Name: "other"}, ""); !ok {
				t.Fatal("slot")
			}
			r := &Reconciler{Slots: slots, Recorder: events.NewFakeRecorder(10)}
			ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
			got, free := r.managedProgress(ig, &tc.obs, upgrade.Progress{Done: true})
			if got.Done != tc.wantDone || got.Waiting != tc.wantWait || free != tc.wantFree || got.Message != tc.wantMsg {
				t.Errorf("progress %+v, release %v; want done %v waiting %v release %v message %q", got, free, tc.wantDone, tc.wantWait, tc.wantFree, tc.wantMsg)
			}
		})
	}
}

// A managed node group's retirement drains its Nodes through the Eviction
// API at most maxUnavailable at once, and is done only when every node is
// drained; a budget that allows no eviction keeps it from being done.
func TestRetireNodesPacedByMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name           string
		maxUnavailable *intstr.IntOrString
		refuse         bool
		// wantCordoned is how many nodes are cordoned after each pass.
		wantCordoned []int
		wantDone     bool
	}{
		{name: "default 1 at a time", wantCordoned: []int{1, 2, 3, 3}, wantDone: true},
		{name: "maxUnavailable 2", maxUnavailable: ptrIntStr(intstr.FromInt32(2)), wantCordoned: []int{2, 3, 3}, wantDone: true},
		{name: "a budget refuses every eviction", refuse: true, wantCordoned: []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			outcome := func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }
			if tc.refuse {
				outcome = refuseEvery
			}
			srv := fakeeviction.New(time.Now, outcome)
			for i := range 3 {
				name := fmt.Sprintf("old-%d", i)
				objs = append(objs, readyNode(name, "aws:///us-west-2a/i-"+name, map[string]string{"eks.amazonaws.com/nodegroup": "old"}))
				if err := srv.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app-" + name},
					Spec: corev1.PodSpec{NodeName: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}); err != nil {
					t.Fatal(err)
				}
			}
			objs = append(objs, readyNode("new-0", "aws:///us-west-2a/i-new", map[string]string{"eks.amazonaws.com/nodegroup": "new"}))
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
			drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: 50 * time.Millisecond, Now: time.Now}
			r := &Reconciler{Client: c, Rolling: &upgrade.RollingUpdate{Drainer: drainer, Client: c}}
			ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
			if tc.maxUnavailable != nil {
				ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: tc.maxUnavailable}
			}
			d := groupDisruptions{r: r, ig: ig}
			var res providers.Retirement
			for pass, want := range tc.wantCordoned {
				var err error
				if res, err = d.DrainNodes(context.Background(), "eks.amazonaws.com/nodegroup", "old"); err != nil {
					t.Fatal(err)
				}
				nodes := &corev1.NodeList{}
				if err := c.List(context.Background(), nodes); err != nil {
					t.Fatal(err)
				}
				cordoned := 0
				for _, n := range nodes.Items {
					if n.Spec.Unschedulable {
						if n.Labels["eks.amazonaws.com/nodegroup"] != "old" {
							t.Errorf("pass %d: node %s of another node group cordoned", pass, n.Name)
						}
						cordoned++
					}
				}
				if cordoned != want {
					t.Errorf("pass %d: %d node(s) cordoned, want %d (%+v)", pass, cordoned, want, res)
				}
			}
			if res.Done != tc.wantDone || !res.Done && !strings.Contains(res.Message, "draining node(s) labelled eks.amazonaws.com/nodegroup=old") {
				t.Errorf("last pass %+v, want done %v", res, tc.wantDone)
			}
			if tc.refuse && srv.Evictions("apps/app-old-1")+srv.Evictions("apps/app-old-2") != 0 {
				t.Error("a node beyond maxUnavailable was drained while the first one is blocked")
			}
		})
	}
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// A Fargate profile's retirement evicts its pods: a pod on a Node (its
// Fargate Node) leaves by that Node's drain, a pod bound to no node by a
// direct eviction; pods of other profiles are not touched; done only when
// none is left.
func TestEvictPodsOfAProfile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refuse    bool
		wantDone  []bool // after each pass
		wantOther int    // evictions of the other profile's pod
	}{
		{name: "evictions allowed", wantDone: []bool{false, true}},
		{name: "a budget refuses every eviction", refuse: true, wantDone: []bool{false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome := func(*corev1.Pod) fakeeviction.Outcome { return fakeeviction.Delete }
			if tc.refuse {
				outcome = refuseEvery
			}
			srv := fakeeviction.New(time.Now, outcome)
			pod := func(name, profile, node string) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: name, Labels: map[string]string{"eks.amazonaws.com/fargate-profile": profile}},
					Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			}
			for _, p := range []*corev1.Pod{pod("a", "old", "fargate-a"), pod("b", "old", "fargate-b"), pod("pending", "old", ""), pod("c", "new", "fargate-c")} {
				if err := srv.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(
				readyNode("fargate-a", "", nil), readyNode("fargate-b", "", nil), readyNode("fargate-c", "", nil)).Build()
			drainer := &drain.Drainer{Kube: srv.Kube, Client: c, Timeout: time.Hour, Step: 50 * time.Millisecond, Now: time.Now}
			r := &Reconciler{Client: c, Rolling: &upgrade.RollingUpdate{Drainer: drainer, Client: c}}
			ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: "batch"}}
			d := groupDisruptions{r: r, ig: ig}
			for pass, want := range tc.wantDone {
				res, err := d.EvictPods(context.Background(), "eks.amazonaws.com/fargate-profile", "old")
				if err != nil {
					t.Fatal(err)
				}
				if res.Done != want {
					t.Errorf("pass %d: %+v, want done %v", pass, res, want)
				}
			}
			if n := srv.Evictions("jobs/c"); n != 0 {
				t.Errorf("the new profile's pod was evicted %d time(s)", n)
			}
			if srv.Evictions("jobs/pending") == 0 {
				t.Error("the pod bound to no node was not evicted")
			}
			if tc.refuse && srv.Evictions("jobs/b") != 0 {
				t.Error("a second Fargate node was drained while the first is blocked (maxUnavailable 1)")
			}
		})
	}
}
