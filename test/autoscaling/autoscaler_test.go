package autoscaling

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/test/harness"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/env"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Pending pods that only one group fits (its label, its taint tolerated)
// make the autoscaler scale that group, and only it, from zero (it knows
// the group's nodes only from the node template tags) up to the group's
// maxSize and no further; once the pods are gone it scales the empty nodes
// in (cordoned and tainted by it first), down to minSize and never below.
func TestAutoscalerScalesOnlyTheGroupThePodsFitWithinItsBounds(t *testing.T) {
	requireAutoscaler(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "ca-fit"
	namespace(t, ns)
	special := corev1.Taint{Key: "dedicated", Value: "special", Effect: corev1.TaintEffectNoSchedule}
	fits := scaledGroup(ns, "special", 0, 2, map[string]string{"pool": "special"}, special)
	// Node health judges its instances after 40 s: shorter than they live
	// before the scale in, so that an instance the autoscaler removed, still
	// InService in a listing up to 2 × --cloud-poll-period old while its
	// Node is gone, would look like one that never joined (review M1).
	fits.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{
		StartupTimeout: &metav1.Duration{Duration: 40 * time.Second}, UnhealthyTimeout: &metav1.Duration{Duration: 10 * time.Second}}
	// Same label, a taint the pods do not tolerate.
	otherTaint := scaledGroup(ns, "other", 0, 3, map[string]string{"pool": "special"},
		corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule})
	// Room to spare, another label; minSize 1 keeps its one empty node.
	general := scaledGroup(ns, "general", 1, 3, map[string]string{"pool": "general"})
	for _, ig := range []*v1alpha1.InstanceGroup{fits, otherTaint, general} {
		create(t, ig)
	}
	names := map[string]string{}
	for _, ig := range []*v1alpha1.InstanceGroup{fits, otherTaint, general} {
		names[ig.Name] = waitReady(t, ig, 3*time.Minute).Status.ActiveScalingGroupName
	}
	g.Expect(desired(t, names["special"])).To(BeEquivalentTo(0), "the group starts at zero: only its tags describe its nodes")
	_, rec := startAutoscaler(t, env.AutoscalerOptions{})
	began := time.Now()

	// Three pods of 1.5 CPU: one per t3.medium (2 vCPU), three wanted,
	// maxSize 2. They select the group's label and its namespace label (a
	// label the kubelet registers and only the node template tags name).
	d := workload(t, ns, "special-app", 3, "1500m",
		map[string]string{"pool": "special", v1alpha1.LabelInstanceGroupNamespace: ns},
		corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "special", Effect: corev1.TaintEffectNoSchedule})
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, 4*time.Minute, time.Second).Should(Equal(2), "two pods run on two new nodes of the group")
	t.Logf("scaled from zero to 2 in %s", time.Since(began).Round(time.Second))
	g.Consistently(func() []int32 {
		return []int32{desired(t, names["special"]), desired(t, names["other"]), desired(t, names["general"])}
	}, 15*time.Second, time.Second).Should(Equal([]int32{2, 0, 1}), "maxSize 2 bounds the group; the other groups are not scaled")
	running, pending := pods(t, d)
	g.Expect([]int{running, pending}).To(Equal([]int{2, 1}), "the third pod stays pending: the group is at its maxSize")
	for _, n := range groupNodes(t, fits) {
		g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", "dedicated")), "the nodes registered with the group's taint")
	}
	for _, w := range capacityWrites(rec.Calls()) {
		g.Expect(w.Group).To(Or(Equal(names["special"]), BeEmpty()), "the autoscaler set the capacity of the special group only: %s", w)
	}

	// Scale-in: without the pods the group's nodes are empty; the
	// autoscaler taints and removes them, down to minSize 0. The general
	// group's empty node stays (minSize 1).
	g.Expect(admin.Delete(ctx, d)).To(Succeed())
	tainted := map[string]bool{}
	var mu sync.Mutex
	stop := watchNodes(t, fits, func(n corev1.Node) {
		for _, taint := range n.Spec.Taints {
			if taint.Key == "ToBeDeletedByClusterAutoscaler" {
				mu.Lock()
				tainted[n.Name] = true
				mu.Unlock()
			}
		}
	})
	began = time.Now()
	// Its AWS provider learns instances it launched only at its next group
	// refresh (every 60s), so allow for that.
	g.Eventually(func() int { return len(groupNodes(t, fits)) }, 4*time.Minute, time.Second).Should(Equal(0), "the empty nodes are scaled in")
	stop()
	t.Logf("scaled in to 0 in %s", time.Since(began).Round(time.Second))
	g.Expect(desired(t, names["special"])).To(BeEquivalentTo(0))
	mu.Lock()
	g.Expect(tainted).To(HaveLen(2), "the autoscaler tainted each node before removing it")
	mu.Unlock()
	g.Expect(desired(t, names["general"])).To(BeEquivalentTo(1), "minSize 1 keeps the general group's empty node")
	g.Expect(groupNodes(t, general)).To(HaveLen(1))

	// The scale in never triggers a node-health repair (issue 26): not
	// while the listing still shows the instances (two listing periods),
	// not after.
	g.Consistently(func() []string {
		return repairs(t, fits)
	}, 2*cloudPollPeriod+10*time.Second, time.Second).Should(BeEmpty(), "node health repaired nothing after the autoscaler's scale in")
	g.Expect(harness.Counter(t, "instance_manager_node_health_replacements_total", map[string]string{"namespace": ns, "name": fits.Name})).To(BeZero())

	terminations := 0
	for _, w := range capacityWrites(rec.Calls()) {
		if w.Action == "TerminateInstanceInAutoScalingGroup" {
			terminations++
		}
	}
	g.Expect(terminations).To(Equal(2), "the autoscaler terminated both instances with a decrement")
	// instance-manager never wrote a desired capacity of these groups after
	// creating them (at minSize).
	for _, w := range capacityWrites(controllerCalls.Calls()) {
		if w.Action != "CreateAutoScalingGroup" && slices.Contains([]string{names["special"], names["other"], names["general"]}, w.Group) {
			t.Errorf("instance-manager set a desired capacity: %s", w)
		}
	}
}

// watchNodes calls seen for every node of the group every 100ms until the
// returned func is called.
func watchNodes(t *testing.T, ig *v1alpha1.InstanceGroup, seen func(corev1.Node)) func() {
	stopCh, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stopCh:
				return
			case <-time.After(100 * time.Millisecond):
			}
			list := &corev1.NodeList{}
			if err := admin.List(context.Background(), list, client.MatchingLabels{
				v1alpha1.LabelInstanceGroup: ig.Name, v1alpha1.LabelInstanceGroupNamespace: ig.Namespace}); err != nil {
				continue
			}
			for _, n := range list.Items {
				seen(n)
			}
		}
	}()
	return func() {
		close(stopCh)
		<-done
	}
}

// A rollout (instance type change, maxUnavailable 1) and an autoscaler
// scale-up for pending pods in the same group both finish; nodes being
// rotated carry the autoscaler's scale-down-disabled annotation; and
// instance-manager never sets the desired capacity the autoscaler owns.
// The test logs who set the group's desired capacity and when.
func TestRolloutAndAutoscalerScaleUpBothFinish(t *testing.T) {
	requireAutoscaler(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "ca-rollout"
	namespace(t, ns)
	ig := scaledGroup(ns, "nodes", 2, 5, map[string]string{"pool": "rolling"})
	create(t, ig)
	ready := waitReady(t, ig, 3*time.Minute)
	name := ready.Status.ActiveScalingGroupName
	selector := map[string]string{v1alpha1.LabelInstanceGroup: ig.Name}
	d := workload(t, ns, "app", 2, "1500m", selector)
	g.Eventually(func() int {
		running, _ := pods(t, d)
		return running
	}, 2*time.Minute, time.Second).Should(Equal(2))
	_, rec := startAutoscaler(t, env.AutoscalerOptions{})

	var mu sync.Mutex
	rotated, unprotected := map[string]bool{}, map[string]bool{}
	stop := watchNodes(t, ig, func(n corev1.Node) {
		if _, draining := n.Annotations[drain.AnnotationDrainStarted]; !draining {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		rotated[n.Name] = true
		if n.Annotations[drain.AnnotationScaleDownDisabled] != "true" {
			unprotected[n.Name] = true
		}
	})

	// A scale-up and a rollout at once: a third pod that needs a third
	// node, and, once the autoscaler has asked for that node (it is still
	// booting: the bridge's join delay), a new instance type.
	began := time.Now()
	cur := d.DeepCopy()
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
	p := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Replicas = ptr.To[int32](3)
	g.Expect(admin.Patch(ctx, cur, p)).To(Succeed())
	g.Eventually(func() []capacityWrite { return capacityWrites(rec.Calls()) }, time.Minute, 200*time.Millisecond).
		ShouldNot(BeEmpty(), "the autoscaler scales the group up for the pending pod")
	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "t3.large"
	g.Expect(admin.Patch(ctx, ready, patch)).To(Succeed())

	g.Eventually(func() string { return rotatedAndRunning(t, ig, d, 3) }, 8*time.Minute, 2*time.Second).Should(Equal("done"), "the rollout finished and the three pods run")
	stop()
	t.Logf("rollout and scale-up finished in %s", time.Since(began).Round(time.Second))
	// The Nodes of the last terminated instances go with the bridge's next
	// poll.
	g.Eventually(func() []string {
		var types []string
		for _, n := range groupNodes(t, ig) {
			types = append(types, n.Labels[corev1.LabelInstanceTypeStable])
		}
		return types
	}, 30*time.Second, time.Second).Should(HaveEach("t3.large"), "every node of the group is of the new type")
	desiredNow, minNow, maxNow, _ := asg(t, name)
	g.Expect(desiredNow).To(BeNumerically(">=", 3))
	g.Expect(desiredNow).To(BeNumerically("<=", maxNow))
	g.Expect(minNow).To(BeEquivalentTo(2))

	mu.Lock()
	g.Expect(len(rotated)).To(BeNumerically(">=", 2), "the old nodes were rotated")
	g.Expect(unprotected).To(BeEmpty(), "every node being rotated carried %s", drain.AnnotationScaleDownDisabled)
	mu.Unlock()

	// The rollout's steps, beside the capacity writes below.
	events := &eventsv1.EventList{}
	g.Expect(admin.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	drained := 0
	for _, e := range events.Items {
		if e.Regarding.Name == ig.Name && (e.Reason == upgrade.ReasonRotationBatch || e.Reason == upgrade.ReasonNodeDrained) {
			t.Logf("rollout: %s %s: %s", e.CreationTimestamp.Format("15:04:05"), e.Reason, e.Note)
			if e.Reason == upgrade.ReasonNodeDrained {
				drained++
			}
		}
	}
	g.Expect(drained).To(BeNumerically(">=", 2), "the old nodes were drained and replaced by the rollout")

	writes := capacityWrites(rec.Calls(), controllerCalls.Calls())
	autoscaler := 0
	for _, w := range writes {
		if w.Group != "" && w.Group != name {
			continue
		}
		t.Logf("desired capacity: %s", w)
		switch {
		case w.Client == "cluster-autoscaler":
			autoscaler++
		case w.Action != "CreateAutoScalingGroup":
			t.Errorf("instance-manager set the desired capacity the autoscaler owns: %s", w)
		}
	}
	g.Expect(autoscaler).To(BeNumerically(">=", 1), "the autoscaler scaled the group up")
}

// repairs lists the node-health Events on ig (a replacement, a halted or a
// failed repair) as "reason: note".
func repairs(t *testing.T, ig *v1alpha1.InstanceGroup) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ig.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind != "InstanceGroup" || e.Regarding.Name != ig.Name {
			continue
		}
		switch e.Reason {
		case nodehealth.EventNodeUnhealthy, nodehealth.EventRepairHalted, "NodeRepairFailed":
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}
