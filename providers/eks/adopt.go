package eks

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// owned returns nil when the resource (kind, name, with tags) is o's, and
// adopted true when it became o's just now. One
// that an earlier InstanceGroup of the same namespace/name, cluster and
// installation left (its finalizer did not run) and whose recorded UID no
// InstanceGroup has any more (ownership.Adopter.Check, through the API
// server) is adopted: retag writes o.Tags() on it, and a Normal Event
// (providers.ReasonAdopted) says so. Anything else is Check's
// *ownership.ForeignError; a failed retag is returned wrapped.
func owned(ctx context.Context, a *ownership.Adopter, o ownership.Owner, kind, name string, tags map[string]string, retag func(context.Context, map[string]string) error) (adopted bool, _ error) {
	prev, err := a.Check(ctx, o, kind, name, tags)
	if err != nil || prev == "" {
		return false, err
	}
	if err := retag(ctx, o.Tags()); err != nil {
		return false, fmt.Errorf("adopting %s %q left by InstanceGroup %s's earlier uid %s: %w", kind, name, o, prev, err)
	}
	log.FromContext(ctx).Info("adopted a resource left by an earlier InstanceGroup of the same name", "kind", kind, "name", name, "previousUID", prev, "uid", o.UID)
	providers.Emit(ctx, corev1.EventTypeNormal, providers.ReasonAdopted,
		"Adopted %s %s left by an earlier InstanceGroup %s (uid %s, which no longer exists); retagged it with uid %s", kind, name, o, prev, o.UID)
	return true, nil
}

// tagScalingGroup writes tags on the Auto Scaling group (Auto Scaling
// CreateOrUpdateTags; propagated to instances launched from now on, as
// asgTag decides).
func tagScalingGroup(ctx context.Context, api awsp.AutoScalingAPI, name string, tags map[string]string) error {
	if _, err := api.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: asgTags(name, tags)}); err != nil {
		return fmt.Errorf("autoscaling CreateOrUpdateTags %s: %w", name, err)
	}
	return nil
}

// collectAdoptions returns ctx holding back its Adopted Events, and flush,
// which emits them as one Event through ctx's sink: the events API merges
// Events of one object, action and reason into a series that keeps the
// first note only, so one Event per resource would name the first alone.
func collectAdoptions(ctx context.Context) (context.Context, func()) {
	parent := providers.EventsFrom(ctx)
	if parent == nil {
		return ctx, func() {}
	}
	var held []string
	ctx = providers.WithEvents(ctx, func(typ, reason, msg string) {
		if reason == providers.ReasonAdopted {
			held = append(held, msg)
			return
		}
		parent(typ, reason, msg)
	})
	return ctx, func() {
		if len(held) > 0 {
			parent(corev1.EventTypeNormal, providers.ReasonAdopted, strings.Join(held, "; "))
		}
	}
}
