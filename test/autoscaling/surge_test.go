package autoscaling

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

// A maxSurge rotation and the autoscaler's scale-in of the same group at
// once (issue 24): an app of 3 pods of 1.5 CPU (one per t3.medium) under
// a PodDisruptionBudget of maxUnavailable 1 fills 3 nodes; the app drops
// to 2 replicas, so the autoscaler removes a node (TerminateInstanceIn
// AutoScalingGroup with a decrement, which waits in the group's
// termination hook while its node is drained), while a new instance type
// rotates the group with maxSurge 1. Both finish: two nodes, each of the
// new type, both pods running, the budget held at every sample (at least
// one of the two pods running once the app is at 2), and no pod lost with
// an instance (the audit of requireAutoscaler).
func TestSurgeRotationWhileTheAutoscalerScalesIn(t *testing.T) {
	requireAutoscaler(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "ca-surge"
	namespace(t, ns)
	ig := scaledGroup(ns, "nodes", 1, 5, map[string]string{"pool": "surge"})
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	create(t, ig)
	ready := waitReady(t, ig, 3*time.Minute)
	name := ready.Status.ActiveScalingGroupName
	_, rec := startAutoscaler(t, env.AutoscalerOptions{})
	d := workload(t, ns, "app", 3, "1500m", map[string]string{v1alpha1.LabelInstanceGroup: ig.Name})
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: d.Spec.Selector}}
	g.Expect(admin.Create(ctx, pdb)).To(Succeed())
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, 4*time.Minute, time.Second).Should(Equal(3), "the autoscaler scales the group to 3 nodes for the 3 pods")

	// The app at 2 replicas: one node becomes unneeded.
	cur := d.DeepCopy()
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
	p := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Replicas = ptr.To[int32](2)
	g.Expect(admin.Patch(ctx, cur, p)).To(Succeed())
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, time.Minute, 200*time.Millisecond).Should(Equal(2))

	var mu sync.Mutex
	minRunning, samples := 1<<30, 0
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			running, _ := pods(t, d)
			mu.Lock()
			minRunning, samples = min(minRunning, running), samples+1
			mu.Unlock()
		}
	}()
	began := time.Now()
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "t3.large"
	g.Expect(admin.Patch(ctx, ready, patch)).To(Succeed())

	g.Eventually(func() string { return rotatedAndRunning(t, ig, d, 2) }, 8*time.Minute, 2*time.Second).Should(Equal("done"), "the rotation finished and both pods run")
	t.Logf("rotation finished in %s", time.Since(began).Round(time.Second))
	// The autoscaler removes the node the app no longer needs, during the
	// rotation or after it (nodes being rotated carry its
	// scale-down-disabled annotation, and each launch delays its
	// scale-down): its termination passes the drain hook like any other.
	g.Eventually(func() int {
		n := 0
		for _, w := range capacityWrites(rec.Calls()) {
			if w.Action == "TerminateInstanceInAutoScalingGroup" && !w.At.Before(began.Add(-time.Minute)) {
				n++
			}
		}
		return n
	}, 4*time.Minute, time.Second).Should(BeNumerically(">=", 1), "the autoscaler scales the group in")
	g.Eventually(func() int32 { return desired(t, name) }, 2*time.Minute, time.Second).Should(BeEquivalentTo(2))
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, time.Minute, time.Second).Should(Equal(2))
	close(stop)
	<-done
	for _, w := range capacityWrites(rec.Calls()) {
		t.Logf("autoscaler: %s", w)
	}
	g.Eventually(func() []string {
		var types []string
		for _, n := range groupNodes(t, ig) {
			types = append(types, n.Labels["node.kubernetes.io/instance-type"])
		}
		return types
	}, 4*time.Minute, time.Second).Should(And(HaveLen(2), HaveEach("t3.large")),
		"two nodes, each of the new type (an instance the autoscaler terminated waits in the hook until the next listing, up to twice --cloud-poll-period, 30 s in this suite)")
	_, minNow, _, _ := asg(t, name)
	g.Expect(minNow).To(BeEquivalentTo(1))
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d samples, fewest running pods %d", samples, minRunning)
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(minRunning).To(BeNumerically(">=", 1), "the PodDisruptionBudget (maxUnavailable 1 of 2) held at every sample")
}
