package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// setBoundaries writes the boundary ConfigMap as the admin and waits
// until the manager has loaded it.
func setBoundaries(t *testing.T, data map[string]string) {
	t.Helper()
	if err := harness.SetBoundaries(context.Background(), admin, data); err != nil {
		t.Fatalf("writing the boundary ConfigMap: %v", err)
	}
}

func namespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// shortGroup is a tenant's short InstanceGroup under the fixture's boundaries.
func shortGroup(namespace, name string, min, max int64) *v1alpha1.InstanceGroup {
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

func get(t *testing.T, ig *v1alpha1.InstanceGroup) *v1alpha1.InstanceGroup {
	t.Helper()
	out := &v1alpha1.InstanceGroup{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(ig), out); err != nil {
		t.Fatalf("getting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	return out
}

func condition(ig *v1alpha1.InstanceGroup, typ string) metav1.ConditionStatus {
	for _, c := range ig.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// waitReady waits until the group is Ready for its current spec
// (harness.WaitReady).
func waitReady(t *testing.T, ig *v1alpha1.InstanceGroup, timeout time.Duration) *v1alpha1.InstanceGroup {
	t.Helper()
	return harness.WaitReady(t, admin, ig, timeout)
}

// groupNodes lists the nodes registered for the group.
func groupNodes(t *testing.T, ig *v1alpha1.InstanceGroup) []corev1.Node {
	t.Helper()
	return harness.GroupNodes(t, admin, ig)
}

// heldNodes names the group's Nodes that are cordoned or carry the drain
// record (upgrade.AnnotationDrainStarted), with their instances. After a
// rotation the last replaced instance leaves its Auto Scaling group a
// moment before its drained Node is deleted (by the bridge here, by the
// cloud node lifecycle controller on EKS): wait for this to be empty
// rather than read it once.
func heldNodes(t *testing.T, ig *v1alpha1.InstanceGroup) []string {
	t.Helper()
	var held []string
	for _, n := range groupNodes(t, ig) {
		if _, marked := n.Annotations[upgrade.AnnotationDrainStarted]; n.Spec.Unschedulable || marked {
			held = append(held, fmt.Sprintf("%s (instance %s, unschedulable %t, drain record %t)", n.Name,
				n.Annotations[env.BridgeInstanceAnnotation], n.Spec.Unschedulable, marked))
		}
	}
	return held
}

// available counts the group's nodes that are Ready and schedulable.
func available(nodes []corev1.Node) int {
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

// create submits ig as the admin and deletes it when the test ends, so a
// failed test leaves no group rotating (holding an upgrade slot) for the
// tests after it.
func create(t *testing.T, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	if err := admin.Create(context.Background(), ig); err != nil {
		t.Fatalf("creating InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	t.Cleanup(func() {
		if err := admin.Delete(context.Background(), ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
		}
	})
}

// groupsByKey reads every InstanceGroup in one List, one consistent
// snapshot of their stored statuses (a Get per group would compare
// statuses from different moments), by namespace/name.
func groupsByKey(ctx context.Context) (map[string]*v1alpha1.InstanceGroup, error) {
	list := &v1alpha1.InstanceGroupList{}
	if err := admin.List(ctx, list); err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.InstanceGroup{}
	for i := range list.Items {
		out[list.Items[i].Namespace+"/"+list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// readyGroups creates a short group "nodes" (1 to 2 nodes) in each
// namespace and waits until every one is Ready.
func readyGroups(t *testing.T, namespaces ...string) []*v1alpha1.InstanceGroup {
	t.Helper()
	var groups []*v1alpha1.InstanceGroup
	for _, ns := range namespaces {
		namespace(t, ns)
		ig := shortGroup(ns, "nodes", 1, 2)
		create(t, ig)
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		waitReady(t, ig, 3*time.Minute)
	}
	return groups
}

// expectUndrained tells the drain audit (harness.Audit) that the
// instances of ig's nodes will go with their pods on purpose: the test
// force-deletes ig (metadata.annotations[force-delete], documented to kill
// pods without eviction). Their losses are forgiven.
func expectUndrained(t *testing.T, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	for _, n := range groupNodes(t, ig) {
		if id := n.Annotations[env.BridgeInstanceAnnotation]; id != "" {
			environment.Bridge.Forgive(id)
		}
	}
}

// counter reads the counter name with the given labels (the others any)
// from the in-process manager's registry; 0 when it has no such series.
func counter(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if matches := func() bool {
				for k, v := range want {
					if labels[k] != v {
						return false
					}
				}
				return true
			}(); matches {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
