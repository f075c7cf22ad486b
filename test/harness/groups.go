package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// WaitReady waits until the group is Ready and not upgrading, as judged for
// its current spec: a Ready status written before the latest spec change
// (status.observedGeneration behind metadata.generation) does not count.
// It returns the group as last read; on timeout t fails with the state and
// conditions seen last.
func WaitReady(t testing.TB, c client.Client, ig *v1alpha1.InstanceGroup, timeout time.Duration) *v1alpha1.InstanceGroup {
	t.Helper()
	var cur *v1alpha1.InstanceGroup
	NewWithT(t).Eventually(func() string {
		cur = &v1alpha1.InstanceGroup{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ig), cur); err != nil {
			return err.Error()
		}
		if cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Sprintf("status observed generation %d, spec generation %d", cur.Status.ObservedGeneration, cur.Generation)
		}
		if cur.Status.CurrentState == v1alpha1.StateReady && meta.IsStatusConditionTrue(cur.Status.Conditions, v1alpha1.ConditionReady) {
			return "Ready"
		}
		msg := cur.Status.CurrentState
		for _, c := range cur.Status.Conditions {
			msg += "; " + c.Type + "=" + string(c.Status) + ": " + c.Message
		}
		return msg
	}, timeout, 500*time.Millisecond).Should(Equal("Ready"), "InstanceGroup %s/%s", ig.Namespace, ig.Name)
	return cur
}

// GroupNodes lists the Nodes registered for the group (by the labels the
// kubelet registers).
func GroupNodes(t testing.TB, c client.Client, ig *v1alpha1.InstanceGroup) []corev1.Node {
	t.Helper()
	list := &corev1.NodeList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{
		v1alpha1.LabelInstanceGroup: ig.Name, v1alpha1.LabelInstanceGroupNamespace: ig.Namespace}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
