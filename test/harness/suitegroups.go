package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// The end-to-end suites' steps, as the admin. Each fails t on an error.

// SetBoundaries writes the boundary ConfigMap and waits until the manager
// has loaded it (the package function SetBoundaries).
func (s *Suite) SetBoundaries(t testing.TB, data map[string]string) {
	t.Helper()
	if err := SetBoundaries(context.Background(), s.Admin, data); err != nil {
		t.Fatalf("writing the boundary ConfigMap: %v", err)
	}
}

// Namespace creates the namespace name unless it exists.
func (s *Suite) Namespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.Admin.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// ShortGroup is a tenant's short InstanceGroup under Cloud.Boundaries:
// t3.medium, minSize min, maxSize max, a "team" label and tag naming the
// namespace.
func ShortGroup(namespace, name string, min, max int64) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{
			MinSize: min, MaxSize: max,
			Configuration: &v1alpha1.EKSConfiguration{
				InstanceType: "t3.medium",
				Labels:       map[string]string{"team": namespace},
				Tags:         []map[string]string{{"key": "team", "value": namespace}},
			},
		}},
	}
}

// Get reads ig as stored.
func (s *Suite) Get(t testing.TB, ig *v1alpha1.InstanceGroup) *v1alpha1.InstanceGroup {
	t.Helper()
	out := &v1alpha1.InstanceGroup{}
	if err := s.Admin.Get(context.Background(), client.ObjectKeyFromObject(ig), out); err != nil {
		t.Fatalf("getting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	return out
}

// Condition is the status of ig's condition typ, "" when it has none.
func Condition(ig *v1alpha1.InstanceGroup, typ string) metav1.ConditionStatus {
	for _, c := range ig.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// WaitReady waits until the group is Ready for its current spec (the
// package function WaitReady).
func (s *Suite) WaitReady(t testing.TB, ig *v1alpha1.InstanceGroup, timeout time.Duration) *v1alpha1.InstanceGroup {
	t.Helper()
	return WaitReady(t, s.Admin, ig, timeout)
}

// GroupNodes lists the Nodes registered for the group.
func (s *Suite) GroupNodes(t testing.TB, ig *v1alpha1.InstanceGroup) []corev1.Node {
	t.Helper()
	return GroupNodes(t, s.Admin, ig)
}

// HeldNodes names the group's Nodes that are cordoned or carry the drain
// record (drain.AnnotationDrainStarted), with their instances. After a
// rotation the last replaced instance leaves its Auto Scaling group a
// moment before its drained Node is deleted (by the bridge here, by the
// cloud node lifecycle controller on EKS): wait for this to be empty
// rather than read it once.
func (s *Suite) HeldNodes(t testing.TB, ig *v1alpha1.InstanceGroup) []string {
	t.Helper()
	var held []string
	for _, n := range s.GroupNodes(t, ig) {
		if _, marked := n.Annotations[drain.AnnotationDrainStarted]; n.Spec.Unschedulable || marked {
			held = append(held, fmt.Sprintf("%s (instance %s, unschedulable %t, drain record %t)", n.Name,
				n.Annotations[env.BridgeInstanceAnnotation], n.Spec.Unschedulable, marked))
		}
	}
	return held
}

// WaitNodesLabelled waits up to timeout until the group has exactly want
// Nodes and each carries label key=value, and fails t naming the Nodes
// otherwise. Read the Nodes this way after a rotation: the status counts
// the Auto Scaling group's instances, and a replaced instance's drained
// Node is deleted a moment after the instance leaves the group.
func (s *Suite) WaitNodesLabelled(t testing.TB, ig *v1alpha1.InstanceGroup, key, value string, want int, timeout time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		nodes := s.GroupNodes(t, ig)
		g.Expect(nodes).To(HaveLen(want))
		for _, n := range nodes {
			g.Expect(n.Labels).To(HaveKeyWithValue(key, value), "Node %s", n.Name)
		}
	}, timeout, 500*time.Millisecond).Should(Succeed(), "InstanceGroup %s/%s: %d Nodes with %s=%s", ig.Namespace, ig.Name, want, key, value)
}

// Available counts the nodes that are Ready and schedulable.
func Available(nodes []corev1.Node) int {
	n := 0
	for i := range nodes {
		if nodes[i].Spec.Unschedulable {
			continue
		}
		for _, c := range nodes[i].Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// Create submits ig and deletes it when the test ends, so a failed test
// leaves no group rotating (holding an upgrade slot) for the tests after
// it.
func (s *Suite) Create(t testing.TB, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	if err := s.Admin.Create(context.Background(), ig); err != nil {
		t.Fatalf("creating InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	t.Cleanup(func() {
		if err := s.Admin.Delete(context.Background(), ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
		}
	})
}

// GroupsByKey reads every InstanceGroup in one List, one consistent
// snapshot of their stored statuses (a Get per group would compare
// statuses from different moments), by namespace/name.
func (s *Suite) GroupsByKey(ctx context.Context) (map[string]*v1alpha1.InstanceGroup, error) {
	list := &v1alpha1.InstanceGroupList{}
	if err := s.Admin.List(ctx, list); err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.InstanceGroup{}
	for i := range list.Items {
		out[list.Items[i].Namespace+"/"+list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// ReadyGroups creates a short group "nodes" (1 to 2 nodes) in each
// namespace and waits until every one is Ready.
func (s *Suite) ReadyGroups(t testing.TB, namespaces ...string) []*v1alpha1.InstanceGroup {
	t.Helper()
	var groups []*v1alpha1.InstanceGroup
	for _, ns := range namespaces {
		s.Namespace(t, ns)
		ig := ShortGroup(ns, "nodes", 1, 2)
		s.Create(t, ig)
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		s.WaitReady(t, ig, 3*time.Minute)
	}
	return groups
}

// ExpectUndrained tells the drain audit (Audit) that the instances of ig's
// nodes will go with their pods on purpose: the test force-deletes ig
// (metadata.annotations[force-delete], documented to kill pods without
// eviction). Their losses are forgiven.
func (s *Suite) ExpectUndrained(t testing.TB, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	for _, n := range s.GroupNodes(t, ig) {
		if id := n.Annotations[env.BridgeInstanceAnnotation]; id != "" {
			s.Env.Bridge.Forgive(id)
		}
	}
}

// Counter reads the counter name with the given labels (the others any)
// from the in-process manager's registry; 0 when it has no such series.
func Counter(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
