package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/reconciler/upgrade/crdtemplate"
)

// tenancy runs the checks of tenant confinement on the final object (see
// InstanceGroupValidator); old is the stored group on an update, nil on a
// create. Groups in an excluded namespace skip the boundary re-check;
// groups in an excluded namespace or the ConfigMap's own (the admin's)
// skip the quotas but not AWS's limits (QuotaProblems), and may select
// pods of any namespace for Fargate. The crd strategy's template is
// checked when it is new or changed. The error is a failure to list
// InstanceGroups.
func (v *InstanceGroupValidator) tenancy(ctx context.Context, obj object, ig, old *v1alpha1.InstanceGroup) (field.ErrorList, error) {
	creating := old == nil
	var errs field.ErrorList
	state := v.Boundaries.Get()
	cfg := state.Config
	excluded := cfg.Excluded(ig.Namespace)
	adminNS := ig.Namespace == v.ConfigMap.Namespace
	cm := v.ConfigMap.String()

	// The restricted paths are re-checked against the boundaries revision
	// the mutating webhook computed the spec from (the group's, during a
	// progressive rollout); quotas, crd kinds and namespaces follow the
	// newest ConfigMap.
	if rev, _ := state.ForAdmission(ig.Annotations[v1alpha1.AnnotationBoundariesHash], ig.Namespace); rev.Config != nil && !rev.Config.Excluded(ig.Namespace) {
		submitted, err := SubmittedSpec(ig)
		if err != nil {
			return append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationSubmittedSpec), "", err.Error())), nil
		}
		probs, err := canonicalConfig(rev.Config).Verify(boundaries.Input{Spec: submitted, Annotations: ig.Annotations, AdminNamespace: adminNS, Namespace: ig.Namespace}, obj.spec())
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec"), "", err.Error()))
		}
		for _, p := range probs {
			errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("%s (ConfigMap %s); a mutating webhook after instance-manager's changed a restricted path", p, cm)))
		}
	}

	// An unchanged template is left to the reconciler, which takes the same
	// decision (crdtemplate.Prepare) before every submission: a crdStrategy
	// the admin tightens then fails that group's next upgrade, with the
	// reason, instead of refusing every other edit of the group (the
	// controller's own included) — the admin can always tighten (security
	// review N13).
	if s := ig.Spec.Strategy; s.Type == v1alpha1.StrategyCRD && s.CRD != nil && s.CRD.Spec != "" && crdTemplateChanged(old, ig) {
		sp := field.NewPath("spec", "strategy", "crd", "spec")
		// The same decision the reconciler takes (crdtemplate.Prepare), on
		// the template alone, whatever the group's status.
		t, err := crdtemplate.Admit(ig, cfg)
		if err == nil && v.Mapper != nil {
			// A kind not served yet is reported by the controller when it
			// submits; a cluster-scoped one is refused here already.
			gvk := t.GroupVersionKind()
			if m, merr := v.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); merr == nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
				err = fmt.Errorf("spec.strategy.crd.spec: kind %s is cluster-scoped; the crd strategy creates namespaced objects in the group's namespace only", gvk.Kind)
			}
		}
		if err != nil {
			errs = append(errs, field.Forbidden(sp, err.Error()+" (ConfigMap "+cm+")"))
		}
	}

	if f := ig.Spec.EKSFargate; f != nil && ig.Spec.Provisioner == v1alpha1.ProvisionerEKSFargate && !excluded && !adminNS {
		for i, sel := range f.Selectors {
			if sel.Namespace != ig.Namespace {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "eks-fargate", "selectors").Index(i).Child("namespace"),
					fmt.Sprintf("%q is not the group's namespace; a Fargate profile may select pods of its own namespace %q only, "+
						"not of any namespace as in keikoproj instance-manager (create the group in %q, or the admin lists %q in ConfigMap %s's excludedNamespaces)",
						sel.Namespace, ig.Namespace, sel.Namespace, ig.Namespace, cm)))
			}
		}
	}

	if v.Reader != nil {
		all := &v1alpha1.InstanceGroupList{}
		if err := v.Reader.List(ctx, all); err != nil {
			return nil, fmt.Errorf("listing InstanceGroups for the quotas: %w", err)
		}
		where := "ConfigMap " + cm
		if cfg == nil || cfg.Quotas == nil {
			where = "the default quotas; ConfigMap " + cm + " sets none"
		}
		for _, p := range QuotaProblems(cfg, ig, all.Items, v.ConfigMap.Namespace, creating) {
			errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("quota exceeded: %s (%s)", p, where)))
		}
	}
	return errs, nil
}

// crdTemplateChanged reports whether ig's crd strategy template is new:
// a create, or an update that changes the strategy type or the template.
func crdTemplateChanged(old, ig *v1alpha1.InstanceGroup) bool {
	if old == nil || old.Spec.Strategy.Type != ig.Spec.Strategy.Type || old.Spec.Strategy.CRD == nil {
		return true
	}
	return old.Spec.Strategy.CRD.Spec != ig.Spec.Strategy.CRD.Spec
}

// BoundaryViolations lists where ig's stored spec differs, on restricted
// paths, from what cfg gives for its kept submission: the validating
// webhook's re-check, for the controller to refuse a group whose spec was
// changed without admission (webhooks unavailable or bypassed). Groups of
// namespaces cfg opts out have none; adminNamespace is the ConfigMap's.
func BoundaryViolations(cfg *boundaries.Config, ig *v1alpha1.InstanceGroup, adminNamespace string) ([]string, error) {
	if cfg == nil || cfg.Excluded(ig.Namespace) {
		return nil, nil
	}
	submitted, err := SubmittedSpec(ig)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(ig.Spec)
	if err != nil {
		return nil, err
	}
	var stored map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, err
	}
	NormalizeSpellings(submitted)
	return canonicalConfig(cfg).Verify(boundaries.Input{Spec: submitted, Annotations: ig.Annotations, AdminNamespace: ig.Namespace == adminNamespace, Namespace: ig.Namespace}, stored)
}
