package harness

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TeamApp runs replicas pods on the nodes of namespace's groups (their
// team label) behind a PodDisruptionBudget of minAvailable, and waits
// until every replica is available; tweaks change its pod spec. Both are
// removed when the test ends.
func (s *Suite) TeamApp(t testing.TB, namespace string, replicas int32, minAvailable intstr.IntOrString, tweaks ...func(*corev1.PodSpec)) *appsv1.Deployment {
	t.Helper()
	g := NewWithT(t)
	labels := map[string]string{"app": "team-app"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "team-app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// No toleration of every taint unless a tweak adds it:
					// that one lets the replacements back onto cordoned nodes.
					NodeSelector: map[string]string{"team": namespace},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
				},
			},
		},
	}
	for _, tweak := range tweaks {
		tweak(&d.Spec.Template.Spec)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "team-app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	g.Expect(s.Admin.Create(context.Background(), d)).To(Succeed())
	g.Expect(s.Admin.Create(context.Background(), pdb)).To(Succeed())
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(s.Admin.Delete(context.Background(), pdb))
		_ = client.IgnoreNotFound(s.Admin.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	g.Eventually(func() int32 { return s.AvailableReplicas(d) }, 2*time.Minute, 500*time.Millisecond).Should(Equal(replicas))
	return d
}

// AvailableReplicas is d's available replicas as stored, -1 when it cannot be read.
func (s *Suite) AvailableReplicas(d *appsv1.Deployment) int32 {
	cur := &appsv1.Deployment{}
	if err := s.Admin.Get(context.Background(), client.ObjectKeyFromObject(d), cur); err != nil {
		return -1
	}
	return cur.Status.AvailableReplicas
}

// PodNodes returns the nodes the app's running pods are on.
func (s *Suite) PodNodes(t testing.TB, namespace string) []string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := s.Admin.List(context.Background(), pods, client.InNamespace(namespace), client.MatchingLabels{"app": "team-app"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out
}
