package providers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Retag writes tags on one resource (the AWS service's tagging call:
// IAM TagRole, EC2 CreateTags, EKS TagResource, ...), adding them to or
// replacing the values of the tags it has.
type Retag func(ctx context.Context, tags map[string]string) error

// Adopt returns nil when the resource (kind, name, with tags) is o's, and
// adopted true when it became o's just now: one that an earlier
// InstanceGroup of the same namespace/name, cluster and installation left
// (its finalizer did not run) and whose recorded UID no InstanceGroup has
// any more (ownership.Adopter.Check, one List through the API server) is
// retagged with o.Tags() and a Normal Event (ReasonAdopted) says so. A nil
// Adopter adopts nothing. Anything else is Check's *ownership.ForeignError
// (the resource is left alone); a failed retag is returned wrapped with
// the kind, name and previous UID. Every provisioner asks it before
// changing a resource found under the name it wants.
func Adopt(ctx context.Context, a *ownership.Adopter, o ownership.Owner, kind, name string, tags map[string]string, retag Retag) (adopted bool, _ error) {
	prev, err := a.Check(ctx, o, kind, name, tags)
	if err != nil || prev == "" {
		return false, err
	}
	if err := retag(ctx, o.Tags()); err != nil {
		return false, fmt.Errorf("adopting %s %q left by InstanceGroup %s's earlier uid %s: %w", kind, name, o, prev, err)
	}
	log.FromContext(ctx).Info("adopted a resource left by an earlier InstanceGroup of the same name", "kind", kind, "name", name, "previousUID", prev, "uid", o.UID)
	Emit(ctx, corev1.EventTypeNormal, ReasonAdopted,
		"Adopted %s %s left by an earlier InstanceGroup %s (uid %s, which no longer exists); retagged it with uid %s", kind, name, o, prev, o.UID)
	return true, nil
}

// CollectAdoptions returns ctx holding back its Adopted Events, and flush,
// which emits them as one Event through ctx's sink: the events API merges
// Events of one object, action and reason into a series that keeps the
// first note only, so one Event per resource would name the first alone.
// A provisioner's Apply calls it first and defers flush.
func CollectAdoptions(ctx context.Context) (context.Context, func()) {
	parent := EventsFrom(ctx)
	if parent == nil {
		return ctx, func() {}
	}
	var held []string
	ctx = WithEvents(ctx, func(typ, reason, msg string) {
		if reason == ReasonAdopted {
			held = append(held, msg)
			return
		}
		parent(typ, reason, msg)
	})
	return ctx, func() {
		if len(held) > 0 {
			parent(corev1.EventTypeNormal, ReasonAdopted, strings.Join(held, "; "))
		}
	}
}
