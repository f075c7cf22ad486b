package webhooks

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

// rolloutChoice is the validating webhook's check of a tenant's choice of
// when its group takes part in a boundaries rollout (the annotation
// v1alpha1.AnnotationRollout, docs/upgrades.md "Approval"): a create or
// update that adds the annotation or changes its value is refused when
// the value is not one the boundary ConfigMap's rollout.tenants allows
// (boundaries.RolloutPolicy.Allows), the error naming
// metadata.annotations[instancemgr.keikoproj.io/rollout] and the valid
// values. Removing it, or leaving it as it was, always passes (removal
// ends a deferral). The controller, the admin's namespace and excluded
// namespaces are not checked; whoever may update the boundary ConfigMap
// (authority) is never refused, but gets a warning when the value has no
// effect. The error is returned when authority cannot tell.
func (v *InstanceGroupValidator) rolloutChoice(ctx context.Context, cfg *boundaries.Config, user authenticationv1.UserInfo, namespace string, old, annotations map[string]string) (field.ErrorList, []string, error) {
	value, has := annotations[v1alpha1.AnnotationRollout]
	was, had := old[v1alpha1.AnnotationRollout]
	if !has || had && was == value || user.Username == v.ControllerUser && v.ControllerUser != "" ||
		namespace == v.ConfigMap.Namespace || cfg.Excluded(namespace) {
		return nil, nil, nil
	}
	var policy *boundaries.RolloutPolicy
	if cfg != nil {
		policy = cfg.Rollout
	}
	ok, why := policy.Allows(value)
	if ok {
		return nil, nil, nil
	}
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationRollout)
	if v.Authority != nil {
		admin, err := v.Authority.MayEditBoundaries(ctx, user)
		if err != nil {
			return nil, nil, err
		}
		if admin {
			return nil, []string{fmt.Sprintf("%s: %s; the rollout ignores it until the boundary ConfigMap %s allows it (rollout.tenants)", path, why, v.ConfigMap)}, nil
		}
	}
	msg := fmt.Sprintf("%s; ask whoever may update the boundary ConfigMap %s to allow it in rollout.tenants, or remove the annotation", why, v.ConfigMap)
	if value != v1alpha1.RolloutApprove && value != v1alpha1.RolloutDefer {
		return field.ErrorList{field.Invalid(path, value, msg)}, nil, nil
	}
	return field.ErrorList{field.Forbidden(path, msg)}, nil, nil
}
