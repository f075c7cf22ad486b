package boundaries

import (
	"fmt"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// TenantChoices is what the admin lets tenants decide about their own
// groups in a rollout (data key rollout, field tenants), through the
// annotation v1alpha1.AnnotationRollout on an InstanceGroup. The zero
// value allows nothing: the annotation is refused for tenants and has no
// effect.
type TenantChoices struct {
	// Approve lets a tenant move its group to the rollout's target ahead
	// of its wave (value v1alpha1.RolloutApprove), also before the admin
	// approved a wave of approval: manual. Such a group is judged alone:
	// its failure is reported on it and does not halt the rollout.
	Approve bool
	// DeferUpTo, when above 0, lets a tenant keep its group out of its
	// wave (value v1alpha1.RolloutDefer) for at most this long after the
	// wave started; the wave does not wait for it.
	DeferUpTo time.Duration
}

// Allows reports whether a tenant may write value in
// v1alpha1.AnnotationRollout, and when not why, naming what the policy
// allows. A nil policy allows nothing.
func (p *RolloutPolicy) Allows(value string) (bool, string) {
	var t TenantChoices
	if p != nil {
		t = p.Tenants
	}
	valid := t.valid()
	switch {
	case value == v1alpha1.RolloutApprove && t.Approve, value == v1alpha1.RolloutDefer && t.DeferUpTo > 0:
		return true, ""
	case value != v1alpha1.RolloutApprove && value != v1alpha1.RolloutDefer:
		return false, fmt.Sprintf("%q is not a rollout choice (valid: %s)", value, valid)
	case p == nil:
		return false, fmt.Sprintf("%q is not allowed: the boundary ConfigMap has no rollout waves (valid: %s)", value, valid)
	}
	return false, fmt.Sprintf("%q is not allowed by the boundary ConfigMap's rollout.tenants (valid: %s)", value, valid)
}

// valid words the values t allows.
func (t TenantChoices) valid() string {
	switch {
	case t.Approve && t.DeferUpTo > 0:
		return fmt.Sprintf("%s, or %s for up to %s after the group's wave started", v1alpha1.RolloutApprove, v1alpha1.RolloutDefer, t.DeferUpTo)
	case t.Approve:
		return v1alpha1.RolloutApprove + " only"
	case t.DeferUpTo > 0:
		return fmt.Sprintf("%s only, for up to %s after the group's wave started", v1alpha1.RolloutDefer, t.DeferUpTo)
	}
	return "none: the admin allows tenants no rollout choice"
}

// MaxDeferUpTo bounds rollout.tenants.deferUpTo: a deferral longer than a
// month keeps a rollout open that long.
const MaxDeferUpTo = 30 * 24 * time.Hour

// tenantFields are the fields of rollout.tenants.
var tenantFields = []string{"approve", "deferUpTo"}

// tenants parses rollout.tenants: {approve: bool, deferUpTo: duration},
// both optional (approve false, no deferral), one of them required.
func (p *parser) tenants(t *TenantChoices, v any, at string) {
	m, ok := p.object(v, at, "an object with approve (true or false) and/or deferUpTo (a duration)", tenantFields...)
	if !ok {
		return
	}
	if len(m) == 0 {
		p.addf("%s: empty: set approve: true (tenants may move their own groups ahead of their wave) and/or deferUpTo (how long they may keep them out of their wave, e.g. 72h), or remove it", at)
		return
	}
	if av, present := m["approve"]; present {
		if b, ok := av.(bool); ok {
			t.Approve = b
		} else {
			p.addf("%s.approve: expected true or false, got %s", at, kindOf(av))
		}
	}
	if dv, present := m["deferUpTo"]; present {
		d := p.duration(dv, at+".deferUpTo", true)
		if d > MaxDeferUpTo {
			p.addf("%s.deferUpTo: %s is out of range (valid: a duration up to %s, or 0 for no deferral)", at, d, MaxDeferUpTo)
			d = 0
		}
		t.DeferUpTo = d
	}
}
