package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/reconciler"
)

// WriteBoundaries creates or replaces the boundary ConfigMap's data as c
// and returns the API server's answer (the ConfigMap webhook may refuse).
func WriteBoundaries(ctx context.Context, c client.Client, data map[string]string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ConfigNamespace, Name: app.ConfigMapName}}
	err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, cm)
	case err != nil:
		return err
	}
	return c.Update(ctx, cm)
}

// SetBoundaries writes the ConfigMap and waits (up to 20s) until the
// manager has loaded it: the BoundariesLoaded Event names its hash.
func SetBoundaries(ctx context.Context, c client.Client, data map[string]string) error {
	if err := WriteBoundaries(ctx, c, data); err != nil {
		return err
	}
	cfg, err := boundaries.Parse(data)
	if err != nil {
		return err
	}
	_, err = WaitForEvent(ctx, c, ConfigNamespace, app.ConfigMapName, reconciler.ReasonBoundariesLoaded, cfg.Hash(false), 20*time.Second)
	return err
}

// WaitForEvent waits until an Event about namespace/name has reason and a
// note containing text, and returns it.
func WaitForEvent(ctx context.Context, c client.Client, namespace, name, reason, text string, timeout time.Duration) (eventsv1.Event, error) {
	var found eventsv1.Event
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, text) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return found, fmt.Errorf("no Event %s on %s/%s containing %q within %s", reason, namespace, name, text, timeout)
	}
	return found, nil
}
