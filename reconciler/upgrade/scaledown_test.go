package upgrade

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// A node being rotated carries the cluster-autoscaler's scale-down-disabled
// annotation from its cordon on; a skipped node loses it again, unless
// someone else had set it.
func TestRotatedNodesAreNotScaledDownByTheAutoscaler(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "users", Annotations: map[string]string{drain.AnnotationScaleDownDisabled: "true"}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(nodes[0], nodes[1]).Build()
	d := &drain.Drainer{Client: c, Timeout: time.Minute, Now: time.Now}
	for _, n := range nodes {
		if err := d.Start(ctx, n, drain.OwnerRotation); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
			t.Fatal(err)
		}
		if !got.Spec.Unschedulable || got.Annotations[drain.AnnotationScaleDownDisabled] != "true" {
			t.Errorf("node %s being rotated: unschedulable %v, annotations %v; want cordoned with %s=true", n.Name, got.Spec.Unschedulable, got.Annotations, drain.AnnotationScaleDownDisabled)
		}
		if _, err := d.Release(ctx, got, drain.OwnerRotation); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
			t.Fatal(err)
		}
		_, has := got.Annotations[drain.AnnotationScaleDownDisabled]
		if want := n.Name == "users"; has != want {
			t.Errorf("node %s skipped: has %s = %v, want %v (annotations %v)", n.Name, drain.AnnotationScaleDownDisabled, has, want, got.Annotations)
		}
	}
}
