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
	"github.com/instancemgr/instance-manager/reconciler/boundaryload"
)

// WriteBoundaries creates or replaces the boundary ConfigMap's data as c
// and returns the API server's answer (the ConfigMap webhook may refuse).
func WriteBoundaries(ctx context.Context, c client.Client, data map[string]string) error {
	_, err := writeBoundaries(ctx, c, data)
	return err
}

// writeBoundaries is WriteBoundaries that also returns the stored version.
func writeBoundaries(ctx context.Context, c client.Client, data map[string]string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ConfigNamespace, Name: app.ConfigMapName}}
	err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, cm)
	case err == nil:
		err = c.Update(ctx, cm)
	}
	return cm, err
}

// BoundariesLoadTimeout bounds how long SetBoundaries waits for the manager
// to load a ConfigMap version: a watch event and one parse, sized for a
// loaded 2-core machine.
const BoundariesLoadTimeout = 60 * time.Second

// SetBoundaries writes the ConfigMap and waits until the manager has
// loaded exactly that version: the BoundariesLoaded Event names the
// ConfigMap's resourceVersion. (Waiting for the hash alone is not enough:
// an Event for the same data from an earlier test would match while the
// manager still runs on the version in between.)
func SetBoundaries(ctx context.Context, c client.Client, data map[string]string) error {
	cm, err := writeBoundaries(ctx, c, data)
	if err != nil {
		return err
	}
	cfg, err := boundaries.Parse(data)
	if err != nil {
		return err
	}
	want := fmt.Sprintf("(hash %s, resourceVersion %s)", cfg.Hash(false), cm.ResourceVersion)
	_, err = WaitForEvent(ctx, c, ConfigNamespace, app.ConfigMapName, boundaryload.ReasonBoundariesLoaded, want, BoundariesLoadTimeout)
	return err
}

// WaitForEvent waits until an Event about namespace/name has reason and a
// note containing text, and returns it.
func WaitForEvent(ctx context.Context, c client.Client, namespace, name, reason, text string, timeout time.Duration) (eventsv1.Event, error) {
	var found eventsv1.Event
	seen := "none"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			seen = "listing failed: " + err.Error()
			return false, nil
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == name {
				notes = append(notes, fmt.Sprintf("%s %q", e.Reason, e.Note))
			}
		}
		if len(notes) > 10 {
			notes = notes[len(notes)-10:] // the newest matter
		}
		if len(notes) > 0 {
			seen = strings.Join(notes, "; ")
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
		return found, fmt.Errorf("no Event %s on %s/%s containing %q within %s; Events seen: %s", reason, namespace, name, text, timeout, seen)
	}
	return found, nil
}
