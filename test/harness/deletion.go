package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/webhooks"
)

// DeleteWithin is how long a deleted group may take to go (issue 26:
// "finish deleting within 2 minutes").
const DeleteWithin = 2 * time.Minute

// WaitGone waits until every group is gone; on timeout t fails naming each
// group left with its finalizers and Deleting condition.
func WaitGone(t testing.TB, c client.Client, groups []*v1alpha1.InstanceGroup, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, ig := range groups {
			cur := &v1alpha1.InstanceGroup{}
			err := c.Get(ctx, client.ObjectKeyFromObject(ig), cur)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				left = append(left, fmt.Sprintf("%s/%s (%v)", ig.Namespace, ig.Name, err))
			default:
				why := "no Deleting condition"
				if d := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting); d != nil {
					why = d.Reason + ": " + d.Message
				}
				left = append(left, fmt.Sprintf("%s/%s (finalizers %v; %s)", ig.Namespace, ig.Name, cur.Finalizers, why))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still stored %s after their deletion: %s", within, strings.Join(left, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WebhooksUnreachable points both InstanceGroup webhooks at an address
// where nothing listens (an admission outage: the API server cannot reach
// any replica) until the test ends, then puts them back.
func WebhooksUnreachable(t testing.TB, admin client.Client) {
	t.Helper()
	ctx := context.Background()
	const dead = "https://127.0.0.1:1/"
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, v); err != nil {
		t.Fatal(err)
	}
	keep := []client.Object{m.DeepCopy(), v.DeepCopy()}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.URL, m.Webhooks[i].ClientConfig.Service = ptr.To(dead), nil
	}
	for i := range v.Webhooks {
		if strings.HasPrefix(v.Webhooks[i].Name, "instancegroups.") {
			v.Webhooks[i].ClientConfig.URL, v.Webhooks[i].ClientConfig.Service = ptr.To(dead), nil
		}
	}
	for _, o := range []client.Object{m, v} {
		if err := admin.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range keep {
			cur := o.DeepCopyObject().(client.Object)
			if err := admin.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				t.Errorf("restoring the webhooks: %v", err)
				continue
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			if err := admin.Update(ctx, o); err != nil {
				t.Errorf("restoring the webhooks: %v", err)
			}
		}
	})
}
