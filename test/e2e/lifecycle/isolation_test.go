package lifecycle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Finding N24 of the 2026-11-29 security review: with per-namespace node
// isolation (the ConfigMap's nodeIsolation and the chart's policy), no
// pod of another namespace runs on an isolated node. A pod naming the
// node in spec.nodeName, with or without a toleration of every taint, is
// refused at admission; a pod bound there anyway (a pods/binding, as a
// scheduler does, or a pod there before isolation) is evicted by the
// taint eviction controller. The group's own pods and a system
// DaemonSet's kind of pod (kube-system, tolerating every taint) keep
// running there.
func TestNodeIsolationKeepsNodeNamePodsOff(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const nsA, nsB = "e2e-iso-a", "e2e-iso-b"
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data[boundaries.KeyNodeIsolation] = boundaries.NodeIsolationPerNamespace
	suite.SetBoundaries(t, data)
	// Runs after the group's deletion (cleanups run last first).
	t.Cleanup(func() { suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)) })
	harness.ApplyNodeIsolationPolicy(t, suite.Admin)
	suite.Namespace(t, nsB)
	ig := suite.ReadyGroups(t, nsA)[0]
	node := suite.GroupNodes(t, ig)[0].Name
	g.Expect(suite.GroupNodes(t, ig)[0].Spec.Taints).To(ContainElement(And(
		HaveField("Key", boundaries.IsolationTaintKey), HaveField("Value", nsA))), "node %s", node)

	// Team A's own pod (its toleration names no effect) and a pod of
	// kube-system tolerating every taint run on the node.
	own := isolationPod(nsA, "own", func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: boundaries.IsolationTaintKey, Operator: corev1.TolerationOpEqual, Value: nsA}}
		s.NodeSelector = map[string]string{corev1.LabelHostname: node}
	})
	system := isolationPod("kube-system", "e2e-iso-daemon", func(s *corev1.PodSpec) {
		tolerateEverything(s)
		s.NodeName = node
	})
	for _, p := range []*corev1.Pod{own, system} {
		g.Expect(suite.Admin.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), p)) })
		waitRunningOn(t, p, node)
	}

	// Refused at admission, once the API server enforces the policy (the
	// toleration of every taint is refused on main too).
	g.Eventually(func() error {
		p := isolationPod(nsB, "tolerate-all", func(s *corev1.PodSpec) { tolerateEverything(s); s.NodeName = node })
		err := suite.Admin.Create(ctx, p)
		if err == nil {
			_ = suite.Admin.Delete(ctx, p)
		}
		return err
	}, 30*time.Second, harness.PollInterval).Should(MatchError(ContainSubstring("spec.tolerations: a pod of namespace " + nsB)))
	t.Run("nodeName is refused at admission", func(t *testing.T) {
		p := isolationPod(nsB, "squatter", func(s *corev1.PodSpec) { s.NodeName = node })
		err := suite.Admin.Create(ctx, p)
		if err == nil {
			_ = suite.Admin.Delete(context.Background(), p)
		}
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.nodeName: a pod of namespace "+nsB+" may not name its node ("+node+")")),
			"team-b's pod naming team-a's node %s", node)
	})

	t.Run("a pod bound there is evicted", func(t *testing.T) {
		g := NewWithT(t)
		// Not scheduled (no scheduler has this name): bound below, as a
		// scheduler holding pods/binding would.
		p := isolationPod(nsB, "bound", func(s *corev1.PodSpec) { s.SchedulerName = "e2e-nobody" })
		g.Expect(suite.Admin.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), p)) })
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		g.Expect(suite.Admin.SubResource("binding").Create(ctx, p, binding)).To(Succeed())
		_, err := harness.WaitForEvent(ctx, suite.Admin, nsB, p.Name, "TaintManagerEviction", "Marking for deletion", 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			return suite.Admin.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		}, 30*time.Second, harness.PollInterval).Should(WithTransform(apierrors.IsNotFound, BeTrue()), "team-b's pod bound to %s", node)
	})

	// The eviction spared the pods allowed there.
	g.Consistently(func(g Gomega) {
		for _, p := range []*corev1.Pod{own, system} {
			cur := &corev1.Pod{}
			g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).To(BeNil(), "pod %s/%s", p.Namespace, p.Name)
			g.Expect(cur.Status.Phase).To(Equal(corev1.PodRunning), "pod %s/%s", p.Namespace, p.Name)
		}
	}, 3*time.Second, harness.PollInterval).Should(Succeed())
}

func isolationPod(ns, name string, edit func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
	edit(&p.Spec)
	return p
}

// waitRunningOn waits until p runs on node.
func waitRunningOn(t *testing.T, p *corev1.Pod, node string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := &corev1.Pod{}
		g.Expect(suite.Admin.Get(context.Background(), client.ObjectKeyFromObject(p), cur)).To(Succeed())
		g.Expect(cur.Spec.NodeName).To(Equal(node))
		g.Expect(cur.Status.Phase).To(Equal(corev1.PodRunning))
	}, time.Minute, harness.PollInterval).Should(Succeed(), "pod %s/%s running on %s", p.Namespace, p.Name, node)
}
