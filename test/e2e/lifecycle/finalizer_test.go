package lifecycle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A group written as a tenant writes YAML, with fields at their zero
// values (minSize: 0, the usual cluster-autoscaler layout), is stored with
// them; the controller's Go types drop them when they serialise the
// group. Deleting its namespace must still delete it and the namespace:
// the finalizer's release once sent the group's spec as the Go types
// serialise it, the validating webhook refused it as a spec change of a
// group being deleted, and the group and its namespace stayed Terminating
// for good (issues "Converges on real AWS" and "Every manifest the
// original project accepts").
func TestDeletingANamespaceDeletesGroupsWrittenWithZeroValues(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-zero-values"
	suite.Namespace(t, ns)

	var groups []*v1alpha1.InstanceGroup
	for _, name := range []string{"a", "b", "c"} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(),
			"kind":       "InstanceGroup",
			"metadata":   map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"eks": map[string]any{
					"minSize": int64(0),
					"maxSize": int64(2),
					"configuration": map[string]any{
						"instanceType": "t3.medium",
						"labels":       map[string]any{"team": ns},
					},
				},
			},
		}}
		g.Expect(suite.Admin.Create(ctx, u)).To(Succeed())
		ig := &v1alpha1.InstanceGroup{}
		ig.Namespace, ig.Name = ns, name
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		suite.WaitReady(t, ig, 3*time.Minute)
		// The premise: the stored spec carries the zero value.
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InstanceGroup"))
		g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), stored)).To(Succeed())
		minSize, found, err := unstructured.NestedInt64(stored.Object, "spec", "eks", "minSize")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue(), "%s/%s is stored with spec.eks.minSize: 0", ig.Namespace, ig.Name)
		g.Expect(minSize).To(BeZero())
	}

	g.Expect(suite.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, ig := range groups {
		harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 2*time.Minute)
	}
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "namespace %s is deleted", ns)
}
