package webhooks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/boundaries"
)

// BoundaryAuthority says whether a requester may decide what the boundary
// ConfigMap decides: such a user may also write the InstanceGroup labels
// that rollout waves select on (they choose a group's wave).
type BoundaryAuthority interface {
	// MayEditBoundaries reports whether user may update the boundary
	// ConfigMap; an error when that cannot be asked (the request is then
	// retried by its client, nothing is admitted on a guess).
	MayEditBoundaries(ctx context.Context, user authenticationv1.UserInfo) (bool, error)
}

// SubjectAccessReviews is the BoundaryAuthority of a cluster: one
// SubjectAccessReview (authorization.k8s.io/v1, create; the chart grants
// it) asking whether the user may update ConfigMap ConfigMap. Asked only
// when a request changes a wave label, so an ordinary admission costs no
// call.
type SubjectAccessReviews struct {
	Client    client.Client
	ConfigMap types.NamespacedName
}

// MayEditBoundaries implements BoundaryAuthority.
func (s SubjectAccessReviews) MayEditBoundaries(ctx context.Context, user authenticationv1.UserInfo) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: s.ConfigMap.Namespace, Verb: "update", Resource: "configmaps", Name: s.ConfigMap.Name,
		},
	}}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether %s may update ConfigMap %s (SubjectAccessReview): %w", user.Username, s.ConfigMap, err)
	}
	return review.Status.Allowed, nil
}

// waveLabelChanges returns one error per label key a wave of policy
// selects on for groups of namespace (RolloutPolicy.WaveLabelKeys) that
// old → labels adds, changes or removes (old is nil on a create). The
// error names metadata.labels.<key>, the waves that use it and who may
// set it. Empty when no such label changes.
func waveLabelChanges(policy *boundaries.RolloutPolicy, namespace string, old, labels map[string]string) field.ErrorList {
	keys := policy.WaveLabelKeys(namespace)
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		was, had := old[k]
		now, has := labels[k]
		if had == has && was == now {
			continue
		}
		var change string
		switch {
		case !had:
			change = fmt.Sprintf("adding %s=%s", k, now)
		case !has:
			change = fmt.Sprintf("removing %s=%s", k, was)
		default:
			change = fmt.Sprintf("changing %s from %s to %s", k, was, now)
		}
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(k), fmt.Sprintf(
			"%s is refused: rollout wave(s) %s of the boundary ConfigMap select InstanceGroups by this label, so it chooses the group's wave, which is the admin's decision; "+
				"ask whoever may update the boundary ConfigMap to set it, or leave the label as it was", change, strings.Join(keys[k], ", "))))
	}
	return errs
}

// waveLabels is the validating webhook's check of wave labels for a
// tenant's create or update of ig in namespace: nothing for the
// controller, the admin's namespace, an excluded namespace or a request
// that changes no wave label; otherwise the changes are refused unless
// authority says the user may update the boundary ConfigMap (nil
// authority: refused). The error is returned when authority cannot tell.
func (v *InstanceGroupValidator) waveLabels(ctx context.Context, cfg *boundaries.Config, user authenticationv1.UserInfo, namespace string, old, labels map[string]string) (field.ErrorList, error) {
	if cfg == nil || cfg.Rollout == nil || user.Username == v.ControllerUser && v.ControllerUser != "" ||
		namespace == v.ConfigMap.Namespace || cfg.Excluded(namespace) {
		return nil, nil
	}
	errs := waveLabelChanges(cfg.Rollout, namespace, old, labels)
	if len(errs) == 0 || v.Authority == nil {
		return errs, nil
	}
	admin, err := v.Authority.MayEditBoundaries(ctx, user)
	if err != nil || admin {
		return nil, err
	}
	return errs, nil
}
