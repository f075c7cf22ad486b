package rollout

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/reconciler/rollout"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A rollout judged by the tenants' workloads (issue 29 item 4): the
// canary's new nodes are Ready, but the pods of a tenant's Deployment on
// them crash-loop (kwok's pod-crash-loop stage, env.KwokCrashLoopAnnotation)
// and stay not Ready past podNotReadyAfter: the rollout halts after the
// canary, the halt names those pods and their (new) nodes, and no other
// group is touched. The same crash-looping pods on the canary's old
// nodes, before the rollout, halt nothing.
func TestCanaryWhosePodsCrashLoopHaltsTheRollout(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const canaryNS = "e2e-pods-canary"
	withPolicy := func(image string) map[string]string {
		d := suite.Cloud.Boundaries(image, 5)
		d["rollout"] = "maxConcurrentUpgrades: 5\nsoak: 20s\n" +
			"failure: {startupTimeout: 5m, podNotReadyAfter: 30s, maxContainerRestarts: 5}\n" +
			"waves:\n- {name: canary, namespaces: [" + canaryNS + "]}\n"
		return d
	}
	startFrom(t, suite.Cloud.AMIs[0], withPolicy(suite.Cloud.AMIs[0]))
	canary, others := rolloutGroups(t, "e2e-pods")
	canaryKey := canary.Namespace + "/" + canary.Name
	before := map[string]int64{}
	for _, o := range others {
		before[o.Namespace] = suite.Get(t, o).Generation
	}

	// The tenant's app: its pods crash-loop wherever they run.
	crashing(t, canaryNS, 2)
	var oldNodes []string
	for _, n := range suite.GroupNodes(t, canary) {
		oldNodes = append(oldNodes, n.Name)
	}

	next := withPolicy(suite.Cloud.AMIs[1])
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	var rec *record.Record
	g.Eventually(func() (string, error) {
		r, err := harness.RolloutRecord(ctx, suite.Admin)
		if err != nil || r.Target != target {
			return "no record of the target yet", err
		}
		if r.Phase == record.PhaseComplete || r.Wave > 0 {
			return "", StopTrying("the rollout went past the canary: " + r.Message)
		}
		rec = r
		return r.Phase, nil
	}, 8*time.Minute, 500*time.Millisecond).Should(Equal(record.PhaseHalted))
	h := rec.Halt
	t.Logf("halted: %s; pods %+v, nodes %v", h.Reason, h.Pods, h.Nodes)
	g.Expect(h.Wave).To(Equal("canary"))
	g.Expect(h.Groups).To(Equal([]string{canaryKey}))
	g.Expect(h.Criterion).To(Equal(record.CriterionPodsNotReady))
	g.Expect(rec.Wave).To(Equal(0), "no wave after the canary started")
	g.Expect(h.Pods).NotTo(BeEmpty())
	g.Expect(h.PodsCount).To(Equal(len(h.Pods)))
	for _, p := range h.Pods {
		g.Expect(p.Pod).To(HavePrefix(canaryNS+"/crash-app-"), "a pod of the tenant's Deployment")
		g.Expect(p.Group).To(Equal(canaryKey))
		g.Expect(oldNodes).NotTo(ContainElement(p.Node), "pods on the old nodes do not count")
		g.Expect(h.Nodes).To(ContainElement(p.Node))
		g.Expect(p.Why).To(And(HavePrefix("not Ready for "), HaveSuffix("(podNotReadyAfter 30s)")))
		g.Expect(h.Reason).To(ContainSubstring(p.Pod + " on node " + p.Node + ": not Ready for "))
	}
	// The canary's nodes are Ready on the new image: the pods failed it, not its nodes.
	cur := suite.Get(t, canary)
	g.Expect(image(cur)).To(Equal(suite.Cloud.AMIs[1]))
	// (the canary's own rotation goes on after the halt: wait for its old node to go).
	var nodes []corev1.Node
	g.Eventually(func() int {
		nodes = suite.GroupNodes(t, canary)
		return len(nodes) - harness.Available(nodes)
	}, 3*time.Minute, time.Second).Should(BeZero(), "every node of the canary is Ready")
	for _, n := range h.Nodes {
		g.Expect(slices.ContainsFunc(nodes, func(x corev1.Node) bool { return x.Name == n })).To(BeTrue(), "node %s is the canary's", n)
	}
	_, err := harness.WaitForEvent(ctx, suite.Admin, harness.ConfigNamespace, app.ConfigMapName, rollout.ReasonHalted, h.Pods[0].Pod+" on node "+h.Pods[0].Node, harness.BoundariesLoadTimeout)
	g.Expect(err).NotTo(HaveOccurred(), "the RolloutHalted Event names the pods")
	_, err = harness.WaitForEvent(ctx, suite.Admin, canary.Namespace, canary.Name, rollout.ReasonGroupFailed, h.Pods[0].Pod+" on node "+h.Pods[0].Node, harness.BoundariesLoadTimeout)
	g.Expect(err).NotTo(HaveOccurred(), "the RolloutGroupFailed Event names the pods")

	// No other group was touched.
	for _, o := range others {
		g.Consistently(func() string {
			cur := suite.Get(t, o)
			if cur.Generation != before[o.Namespace] {
				return "generation changed"
			}
			return image(cur)
		}, 5*time.Second, time.Second).Should(Equal(suite.Cloud.AMIs[0]), "%s/%s", o.Namespace, o.Name)
	}
}

// crashing runs a Deployment of replicas pods on the nodes of namespace's
// groups whose containers crash-loop (twice restarted so far, under the
// policy's maxContainerRestarts), and waits until they run, not Ready.
// No PodDisruptionBudget: a drain evicts them. Removed when the test ends.
func crashing(t *testing.T, namespace string, replicas int32) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	labels := map[string]string{"app": "crash-app"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "crash-app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{env.KwokCrashLoopAnnotation: "2"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"team": namespace},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:broken"}},
				},
			},
		},
	}
	g.Expect(suite.Admin.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	g.Eventually(func() string {
		pods := &corev1.PodList{}
		if err := suite.Admin.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return err.Error()
		}
		var states []string
		for _, p := range pods.Items {
			st := string(p.Status.Phase)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil {
					st += "/" + cs.State.Waiting.Reason
				}
			}
			states = append(states, st)
		}
		return strings.Join(states, ",")
	}, 2*time.Minute, 500*time.Millisecond).Should(Equal(strings.TrimSuffix(strings.Repeat("Running/CrashLoopBackOff,", int(replicas)), ",")))
}
