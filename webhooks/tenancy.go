package webhooks

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/crdtemplate"
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
	rev, _ := state.ForAdmission(ig.Annotations[v1alpha1.AnnotationBoundariesHash], ig.Namespace)
	final := obj.spec()
	if final == nil {
		final = map[string]any{} // no spec: every restricted path unset (nil would mean ig.Spec)
	}
	probs, err := boundaries.Violations(rev.Config, ig, final, v.ConfigMap.Namespace)
	var unreadable *boundaries.SubmittedError
	switch {
	case errors.As(err, &unreadable):
		return append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationSubmittedSpec), "", err.Error())), nil
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath("spec"), "", err.Error()))
	}
	for _, p := range probs {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("%s (ConfigMap %s); a mutating webhook after instance-manager's changed a restricted path", p, cm)))
	}

	// A template is checked when it is new (crdtemplate.Changed); the
	// reconciler takes the same decision (crdtemplate.Prepare) before every
	// submission.
	if crdtemplate.HasTemplate(ig) && crdtemplate.Changed(old, ig) {
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
