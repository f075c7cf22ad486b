package rollout

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// Event reasons of the tenants' choices (v1alpha1.AnnotationRollout), on
// the group; a failure is also reported on the boundary ConfigMap.
const (
	// ReasonGroupMovedEarly: its tenant approved it ahead of its wave.
	ReasonGroupMovedEarly = "RolloutGroupMovedEarly"
	// ReasonGroupDeferred: its tenant keeps it out of its wave, until when.
	ReasonGroupDeferred = "RolloutGroupDeferred"
	// ReasonGroupDeferralEnded: it moves after its wave, and why now.
	ReasonGroupDeferralEnded = "RolloutGroupDeferralEnded"
	// ReasonTenantGroupFailed (Warning): a group moved at its tenant's
	// time failed a criterion; judged alone, it does not halt the rollout.
	ReasonTenantGroupFailed = "RolloutTenantGroupFailed"
)

// The safety of the tenants' choices (review security-2026-11-26, N13: a
// tenant that chooses when its group moves must not halt the fleet):
//   - a group moved early or late is judged alone (record.Record.Early,
//     Late): by the same criteria as a wave's group (observe), but its
//     failure is reported on it and on the ConfigMap and halts nothing;
//     it is in no wave, so it counts in no wave's unhealthy share nor
//     pace, and no wave takes it;
//   - a deferred group is in no wave either: the wave does not wait for
//     it; but a wave keeps at least one group (deferOut), so deferrals
//     cannot empty the canary and let the fleet go unjudged;
//   - choices move groups only while the rollout progresses (not while it
//     is halted or rolled back) and inside a maintenance window;
//   - only what the policy allows now counts: an annotation the admin's
//     rollout.tenants does not allow (any more) is ignored, and a deferral
//     it no longer allows ends.

// tenants carries out the tenants' choices of a Progressing rollout: it
// ends deferrals, moves the groups approved early, and judges the groups
// moved at their tenant's time.
func (s *stepper) tenants() {
	if len(s.rec.Early)+len(s.rec.Late)+len(s.rec.Deferred) == 0 && !slices.ContainsFunc(s.in.Groups, func(g Group) bool { return g.Tenant != "" }) {
		return // nothing to do: a fleet's step costs no map
	}
	byKey := make(map[string]Group, len(s.in.Groups))
	for _, g := range s.in.Groups {
		byKey[g.Key] = g
	}
	open, next, _ := s.in.Maintenance.Open(s.in.Now)
	if !open && !next.IsZero() {
		defer func() {
			if s.waitsForWindow() {
				s.wake(next)
			}
		}()
	}
	s.release(byKey, open)
	if s.in.Policy.Tenants.Approve && open {
		s.early(byKey)
	}
	s.judgeAlone(&s.rec.Early, byKey)
	s.judgeAlone(&s.rec.Late, byKey)
}

// waitsForWindow reports whether a tenant's choice waits for a
// maintenance window: a deferral that could end, or an approval.
func (s *stepper) waitsForWindow() bool {
	if len(s.rec.Deferred) > 0 {
		return true
	}
	placed := s.taken(len(s.rec.Waves))
	for _, g := range s.in.Groups {
		if s.in.Policy.Tenants.Approve && g.Tenant == v1alpha1.RolloutApprove && !placed[g.Key] && !g.Excluded && !g.Deleting {
			return true
		}
	}
	return false
}

// release ends the deferrals whose tenant took the annotation off (or
// changed it), that the policy no longer allows, or whose bound passed:
// inside a maintenance window, the group moves (record.Record.Late).
// A deleted group's deferral is dropped.
func (s *stepper) release(byKey map[string]Group, open bool) {
	rec := s.rec
	kept := rec.Deferred[:0]
	for _, d := range rec.Deferred {
		g, ok := byKey[d.Group]
		if !ok || g.Deleting {
			continue
		}
		var why string
		switch {
		case g.Tenant != v1alpha1.RolloutDefer:
			why = "its tenant removed " + v1alpha1.AnnotationRollout + "=" + v1alpha1.RolloutDefer
		case s.in.Policy.Tenants.DeferUpTo == 0:
			why = "the boundary ConfigMap's rollout.tenants no longer allows deferrals"
		case !s.in.Now.Before(d.Until.Time):
			why = "its deferral reached its bound " + d.Until.UTC().Format(time.RFC3339) + " (rollout.tenants.deferUpTo after wave " + d.Wave + " started)"
		default:
			s.wake(d.Until.Time)
		}
		if why == "" || !open {
			kept = append(kept, d)
			continue
		}
		rec.Late = append(rec.Late, s.member(g))
		s.note(false, g.Key, ReasonGroupDeferralEnded, "Deferral out of wave %s ended: %s; the group moves to boundaries revision %s now, judged alone (its failure does not halt the rollout)",
			d.Wave, why, rec.Target)
	}
	rec.Deferred = kept
}

// early moves the groups whose tenant approved them (v1alpha1.
// RolloutApprove) and that no wave took yet: ahead of their wave, whether
// or not the admin approved it.
func (s *stepper) early(byKey map[string]Group) {
	rec := s.rec
	placed := s.taken(len(rec.Waves))
	for _, g := range s.in.Groups {
		if g.Tenant != v1alpha1.RolloutApprove || placed[g.Key] || g.Excluded || g.Deleting {
			continue
		}
		rec.Early = append(rec.Early, s.member(g))
		s.note(false, g.Key, ReasonGroupMovedEarly, "Its tenant approved it (%s=%s): the group moves to boundaries revision %s now, ahead of its wave; it is judged alone: a failure is reported on it and does not halt the rollout",
			v1alpha1.AnnotationRollout, v1alpha1.RolloutApprove, rec.Target)
	}
}

// deferOut returns the members of wave w that stay in it: all but those
// whose tenant defers them (v1alpha1.RolloutDefer) where the policy allows
// deferrals, whose deferral it records with its bound. A wave always
// keeps one group: when every member is deferred, the first is not (an
// Event on it says so), so that a wave, the canary above all, cannot be
// emptied by deferrals and let the next one start without judging
// anything.
func (s *stepper) deferOut(members []Group, w *record.Wave) []Group {
	upTo := s.in.Policy.Tenants.DeferUpTo
	defers := func(g Group) bool { return upTo > 0 && g.Tenant == v1alpha1.RolloutDefer }
	if len(members) == 0 || !slices.ContainsFunc(members, defers) {
		return members
	}
	var kept []Group
	if !slices.ContainsFunc(members, func(g Group) bool { return !defers(g) }) {
		kept = append(kept, members[0])
		s.note(true, members[0].Key, ReasonGroupDeferred, "Its tenant defers it (%s=%s), but every group of wave %s is deferred and a wave judges at least one group: this one moves with the wave",
			v1alpha1.AnnotationRollout, v1alpha1.RolloutDefer, w.Name)
		members = members[1:]
	}
	until := metav1.NewTime(s.in.Now.Add(upTo))
	for _, g := range members {
		if !defers(g) {
			kept = append(kept, g)
			continue
		}
		s.rec.Deferred = append(s.rec.Deferred, record.Deferral{Group: g.Key, Wave: w.Name, Until: until})
		s.note(false, g.Key, ReasonGroupDeferred, "Its tenant defers it (%s=%s): wave %s started without it; it keeps boundaries revision %s until the annotation is removed, and moves to %s at the latest at %s (inside a maintenance window)",
			v1alpha1.AnnotationRollout, v1alpha1.RolloutDefer, w.Name, g.Running, s.rec.Target, until.UTC().Format(time.RFC3339))
		s.wake(until.Time)
	}
	return kept
}

// judgeAlone judges the groups moved at their tenant's time by the
// policy's criteria, each on its own; a failure is reported on the group
// and on the ConfigMap, once, and halts nothing. Deleted groups leave the
// list.
func (s *stepper) judgeAlone(list *[]record.Group, byKey map[string]Group) {
	kept := (*list)[:0]
	for _, m := range *list {
		g, ok := byKey[m.Group]
		if !ok || g.Deleting {
			continue
		}
		was := m.State
		s.observe(&m, g, s.in.Policy.Failure)
		if m.State == record.GroupFailed && was != record.GroupFailed {
			s.note(true, g.Key, ReasonTenantGroupFailed, "Boundaries revision %s failed on this group, which its tenant moved outside its wave (%s); judged alone, it does not halt the rollout",
				s.rec.Target, m.Reason)
			s.note(true, "", ReasonTenantGroupFailed, "Boundaries revision %s failed on %s, which its tenant moved outside its wave (%s); judged alone, the rollout carries on",
				s.rec.Target, g.Key, m.Reason)
		}
		kept = append(kept, m)
	}
	*list = kept
}

// tenantsSettled reports whether no tenant's choice keeps the rollout
// open: no group deferred, every group moved early or late judged
// (healthy, failed, or unjudged on the target).
func (s *stepper) tenantsSettled() bool {
	if len(s.rec.Deferred) > 0 {
		return false
	}
	at := map[string]bool{}
	for _, g := range s.in.Groups {
		at[g.Key] = g.AtTarget
	}
	for _, l := range [][]record.Group{s.rec.Early, s.rec.Late} {
		for _, m := range l {
			if m.State != record.GroupHealthy && m.State != record.GroupFailed && !(m.State == record.GroupUnjudged && at[m.Group]) {
				return false
			}
		}
	}
	return true
}

// failedAlone names ("namespace/name") the groups moved at their tenant's
// time (early or late) on which the revision failed, judged alone.
func failedAlone(rec *record.Record) []string {
	var failed []string
	for _, l := range [][]record.Group{rec.Early, rec.Late} {
		for _, m := range l {
			if m.State == record.GroupFailed {
				failed = append(failed, m.Group)
			}
		}
	}
	return failed
}

// tenantsText words the tenants' choices for the record's message:
// `moved by their tenants: 1 early, 0 late (1 failed alone); 2 deferred,
// the last until 2026-...`; "" when there are none.
func tenantsText(rec *record.Record) string {
	if len(rec.Early)+len(rec.Late)+len(rec.Deferred) == 0 {
		return ""
	}
	t := fmt.Sprintf("moved by their tenants: %d early, %d late (%d failed, judged alone); %d deferred", len(rec.Early), len(rec.Late), len(failedAlone(rec)), len(rec.Deferred))
	var last time.Time
	for _, d := range rec.Deferred {
		if d.Until.After(last) {
			last = d.Until.Time
		}
	}
	if !last.IsZero() {
		t += ", the last until " + last.UTC().Format(time.RFC3339)
	}
	return t
}
