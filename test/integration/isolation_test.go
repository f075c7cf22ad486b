package integration

// Per-namespace node isolation (issue 25 item 6; Attack 13, N9; N24):
// the ValidatingAdmissionPolicy of examples/node-isolation, against the
// real kube-apiserver, as impersonated tenants who may create pods in
// their own namespace.

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/test/harness"
)

// allowPods lets the tenant create pods in its namespace.
func allowPods(t *testing.T, tn *tenant) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn.namespace, Name: "pod-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn.namespace, Name: "pod-editor-" + tn.user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: tn.user}}}
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func podIn(ns, name string, edit func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	edit(&p.Spec)
	return p
}

func TestNodeIsolationKeepsOtherNamespacesOff(t *testing.T) {
	requireEnv(t)
	nsA, nsB := uniqueNamespace("team-iso-a"), uniqueNamespace("team-iso-b")
	data := exampleConfigMapData(t)
	data[boundaries.KeyNodeIsolation] = boundaries.NodeIsolationPerNamespace
	g, ctx, a := underBoundaries(t, data, "iso-tenant-a", nsA)
	b := newTenant(t, "iso-tenant-b", nsB)
	allowPods(t, a)
	allowPods(t, b)
	harness.ApplyNodeIsolationPolicy(t, admin)

	// Team A's group gets its namespace's taint (the label is the
	// controller's on every group's nodes).
	nodes := shortIG(nsA, "nodes")
	g.Expect(a.client.Create(ctx, nodes)).To(Succeed())
	// Deleted at the end: a group left behind would make later tests'
	// ConfigMaps invalid (admission's dry run skips groups being deleted).
	t.Cleanup(func() { _ = admin.Delete(context.Background(), nodes) })
	taints := getIG(t, nsA, "nodes").Spec.EKS.Configuration.Taints
	g.Expect(taints).To(ContainElement(corev1.Taint{Key: boundaries.IsolationTaintKey, Value: nsA, Effect: corev1.TaintEffectNoExecute}))

	// Team B's pod tolerating A's taint is refused (once the API server has
	// loaded the policy).
	tolerateA := func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: boundaries.IsolationTaintKey, Operator: corev1.TolerationOpEqual, Value: nsA, Effect: corev1.TaintEffectNoExecute}}
	}
	var err error
	g.Eventually(func() error {
		err = b.client.Create(ctx, podIn(nsB, "intruder", tolerateA))
		if err == nil {
			_ = admin.Delete(ctx, podIn(nsB, "intruder", tolerateA))
		}
		return err
	}, 30*time.Second, 250*time.Millisecond).Should(HaveOccurred())
	g.Expect(err).To(MatchError(And(ContainSubstring("instancemgr-node-isolation"),
		ContainSubstring("spec.tolerations: a pod of namespace "+nsB+" may tolerate the node isolation taint "+boundaries.IsolationTaintKey+" only with the value "+nsB))))

	for name, edit := range map[string]func(*corev1.PodSpec){
		"tolerate-all": func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} },
		"tolerate-key": func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: boundaries.IsolationTaintKey, Operator: corev1.TolerationOpExists}}
		},
		"select-a": func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{v1alpha1.LabelInstanceGroupNamespace: nsA} },
		"require-a": func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: v1alpha1.LabelInstanceGroupNamespace, Operator: corev1.NodeSelectorOpIn, Values: []string{nsB, nsA}}}}}}}}
		},
		// N24: a pod naming its node skips the scheduler's taint checks.
		"node-name": func(s *corev1.PodSpec) { s.NodeName = "ip-10-0-12-34.ec2.internal" },
	} {
		g.Expect(b.client.Create(ctx, podIn(nsB, name, edit))).To(MatchError(ContainSubstring("instancemgr-node-isolation")), name)
	}
	// A's own pod may not name a node either (the message says what to
	// use); a pod of an excluded namespace may.
	g.Expect(a.client.Create(ctx, podIn(nsA, "pinned", func(s *corev1.PodSpec) {
		tolerateA(s)
		s.NodeName = "ip-10-0-12-34.ec2.internal"
	}))).To(MatchError(ContainSubstring("spec.nodeName: a pod of namespace " + nsA + " may not name its node (ip-10-0-12-34.ec2.internal): select nodes with spec.nodeSelector or node affinity")))
	system := podIn("kube-system", uniqueNamespace("daemon-like"), func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		s.NodeName = "ip-10-0-12-34.ec2.internal"
	})
	g.Expect(admin.Create(ctx, system)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), system) })

	// A's own pod, tolerating and selecting its nodes, is admitted; so is
	// B's pod for B's nodes, and an ordinary pod.
	g.Expect(a.client.Create(ctx, podIn(nsA, "own", func(s *corev1.PodSpec) {
		tolerateA(s)
		s.NodeSelector = map[string]string{v1alpha1.LabelInstanceGroupNamespace: nsA}
	}))).To(Succeed())
	g.Expect(b.client.Create(ctx, podIn(nsB, "own", func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: boundaries.IsolationTaintKey, Value: nsB}}
	}))).To(Succeed())
	g.Expect(b.client.Create(ctx, podIn(nsB, "plain", func(*corev1.PodSpec) {}))).To(Succeed())
}
