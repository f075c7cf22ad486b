package autoscaling

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/autoscalerpriority"
	"github.com/instancemgr/instance-manager/test/env"
)

// Overflow: two groups fit a pending pod; the manager lists them in the
// priority expander's ConfigMap by their priority annotations, so the
// autoscaler scales the preferred one first. Its instances never become
// nodes (no capacity of that kind: in moto a launch cannot fail, so the
// bridge keeps them from joining), so once --max-node-provision-time has
// passed the autoscaler backs it off and scales the next group, where the
// pod runs.
func TestOverflowMovesToTheNextGroupByPriority(t *testing.T) {
	requireAutoscaler(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "ca-overflow"
	namespace(t, ns)
	preferred := scaledGroup(ns, "preferred", 0, 2, map[string]string{"pool": "overflow"})
	preferred.Annotations[v1alpha1.AnnotationClusterAutoscalerPriority] = "50"
	fallback := scaledGroup(ns, "fallback", 0, 2, map[string]string{"pool": "overflow"})
	fallback.Annotations[v1alpha1.AnnotationClusterAutoscalerPriority] = "10"
	var mu sync.Mutex
	neverJoined := map[string]bool{}
	environment.Bridge.SetNeverJoin(func(group, id string) bool {
		if !strings.Contains(group, "-ca-overflow-preferred-") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		neverJoined[id] = true
		return true
	})
	t.Cleanup(func() { environment.Bridge.SetNeverJoin(nil) })
	create(t, preferred)
	create(t, fallback)
	names := map[string]string{}
	for _, ig := range []*v1alpha1.InstanceGroup{preferred, fallback} {
		names[ig.Name] = waitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	}
	g.Eventually(func() string {
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: priorityConfigMap}, cm); err != nil {
			return err.Error()
		}
		return cm.Data[autoscalerpriority.DataKey]
	}, time.Minute, time.Second).Should(And(
		ContainSubstring("50:\n  - \"^"+names["preferred"]+"$\""),
		ContainSubstring("10:\n  - \"^"+names["fallback"]+"$\"")), "the manager lists the groups by priority")

	_, rec := startAutoscaler(t, env.AutoscalerOptions{Expander: "priority", MaxNodeProvisionTime: 40 * time.Second})
	d := workload(t, ns, "overflow-app", 1, "1500m", map[string]string{"pool": "overflow"})
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, 5*time.Minute, 2*time.Second).Should(Equal(1), "the pod runs once the autoscaler moved on to the fallback group")
	var order []string
	for _, w := range capacityWrites(rec.Calls()) {
		if w.Action == "SetDesiredCapacity" {
			t.Logf("desired capacity: %s", w)
			order = append(order, w.Group)
		}
	}
	g.Expect(order).NotTo(BeEmpty())
	g.Expect(order[0]).To(Equal(names["preferred"]), "the preferred group is tried first")
	g.Expect(order).To(ContainElement(names["fallback"]), "then the next by priority")
	nodes := groupNodes(t, fallback)
	g.Expect(nodes).NotTo(BeEmpty())
	list := &corev1.PodList{}
	g.Expect(admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "overflow-app"})).To(Succeed())
	g.Expect(list.Items).To(ContainElement(HaveField("Spec.NodeName", nodes[0].Name)))
	mu.Lock()
	g.Expect(neverJoined).NotTo(BeEmpty(), "the preferred group launched instances that never joined")
	mu.Unlock()
}
