package crdtemplate

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

// HasTemplate reports whether ig uses the crd strategy with a template
// (spec.strategy.crd.spec): the groups the confinement checks apply to.
func HasTemplate(ig *v1alpha1.InstanceGroup) bool {
	s := ig.Spec.Strategy
	return s.Type == v1alpha1.StrategyCRD && s.CRD != nil && s.CRD.Spec != ""
}

// Changed reports whether ig's crd strategy template is new against old,
// the stored group (nil on a create): a create, or an update that changes
// the strategy type or the template. An unchanged template is left to the
// reconciler, which takes the same decision (Prepare) before every
// submission: a crdStrategy the admin tightens then fails that group's
// next upgrade, with the reason, instead of refusing every other edit of
// the group (the controller's own included) — the admin can always
// tighten (security review N13).
func Changed(old, ig *v1alpha1.InstanceGroup) bool {
	if old == nil || old.Spec.Strategy.Type != ig.Spec.Strategy.Type || old.Spec.Strategy.CRD == nil {
		return true
	}
	return old.Spec.Strategy.CRD.Spec != ig.Spec.Strategy.CRD.Spec
}

// NewlyRefused returns why next, a new ConfigMap, refuses ig's template
// (Admit) where current admits it: a kind no longer allowed, a field no
// longer the tenant's. It returns nil when next admits it, when current
// refuses it already (not this change's doing), or when ig has no
// template (HasTemplate). A nil current refuses nothing new.
func NewlyRefused(ig *v1alpha1.InstanceGroup, current, next *boundaries.Config) error {
	if current == nil || !HasTemplate(ig) {
		return nil
	}
	_, refused := Admit(ig, next)
	if refused == nil {
		return nil
	}
	if _, err := Admit(ig, current); err != nil {
		return nil
	}
	return refused
}
