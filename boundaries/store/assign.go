package store

import (
	"maps"
	"slices"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// Reasons a group does not run the current revision (Assignment.Reason).
const (
	// WaitingForRollout: the ConfigMap changed and the rollout controller
	// has not started rolling it out yet.
	WaitingForRollout = "WaitingForRollout"
	// WaitingForWave: the group's wave has not started.
	WaitingForWave = "WaitingForWave"
	// RolloutHalted: a wave failed; no group moves.
	RolloutHalted = "RolloutHalted"
	// RolledBack: the group failed and was moved back to the last good
	// revision.
	RolledBack = "RolledBack"
	// DeferredByTenant: the group's tenant keeps it out of its wave
	// (v1alpha1.RolloutDefer) for now.
	DeferredByTenant = "DeferredByTenant"
)

// Assignment is the boundaries revision a group is to be admitted against.
type Assignment struct {
	// Revision names Config; "" without a ConfigMap.
	Revision string
	// Config is the boundaries of that revision; nil without a ConfigMap.
	Config *boundaries.Config
	// Hash is Config.Hash for the group's namespace: the boundaries-hash
	// the group carries once admitted against it.
	Hash string
	// Pending is the current revision when the group is held on another
	// one, else "".
	Pending string
	// Reason says why the group is held (WaitingForRollout,
	// WaitingForWave, RolloutHalted, RolledBack, DeferredByTenant); ""
	// when it is not.
	Reason string
	// Wave names the group's wave of the rollout, once it started
	// (record.TenantEarly or TenantLate for a group moved at its tenant's
	// time).
	Wave string
}

// Policy is the current ConfigMap's rollout policy; nil for none (every
// group gets every change at once).
func (s State) Policy() *boundaries.RolloutPolicy {
	if s.Config == nil {
		return nil
	}
	return s.Config.Rollout
}

// Maintenance returns the boundaries' maintenance windows and freezes;
// nil when there are none (changes may start at any time).
func (s State) Maintenance() *boundaries.Maintenance {
	if s.Config == nil {
		return nil
	}
	return s.Config.Maintenance
}

// assign returns the assignment to revision rev (found in the current
// ConfigMap or the record) for a group of namespace.
func (s State) assign(rev, namespace string) (Assignment, bool) {
	cfg, ok := s.config(rev)
	if !ok {
		return Assignment{}, false
	}
	return Assignment{Revision: rev, Config: cfg, Hash: cfg.Hash(cfg.Excluded(namespace))}, true
}

func (s State) config(rev string) (*boundaries.Config, bool) {
	if rev == s.Revision {
		return s.Config, true
	}
	cfg, ok := s.Revisions[rev]
	return cfg, ok && cfg != nil
}

func (s State) current(namespace string) Assignment {
	return Assignment{Revision: s.Revision, Config: s.Config, Hash: s.Config.Hash(s.Config.Excluded(namespace))}
}

// Running returns the revision whose boundaries give hash for a group of
// namespace: the current one, the stable, the target, then the others the
// record keeps. ok is false when no known revision gives it (the group
// was admitted before the record kept revisions, or against one that is
// gone).
func (s State) Running(hash, namespace string) (Assignment, bool) {
	if hash == "" {
		return Assignment{}, false
	}
	order := []string{s.Revision}
	if s.Record != nil {
		order = append(order, s.Record.Stable, s.Record.Target)
	}
	order = append(order, slices.Sorted(maps.Keys(s.Revisions))...)
	for _, rev := range order {
		if a, ok := s.assign(rev, namespace); ok && a.Hash == hash {
			return a, true
		}
	}
	return Assignment{}, false
}

// Entry is the revision a new group is admitted against: the current one,
// unless a rollout policy holds the current revision back (a rollout not
// started, in progress before its last wave, halted or rolled back); then
// the stable revision.
func (s State) Entry(namespace string) Assignment {
	rec := s.Record
	if s.Config == nil || s.Policy() == nil || rec == nil || s.Config.Excluded(namespace) {
		return s.current(namespace)
	}
	if rec.Target == s.Revision && (rec.Phase == record.PhaseComplete || rec.Phase == record.PhaseProgressing && rec.LastWaveStarted()) {
		return s.current(namespace)
	}
	if a, ok := s.assign(rec.Stable, namespace); ok {
		a.Pending, a.Reason = s.Revision, WaitingForRollout
		if rec.Target == s.Revision {
			a.Reason = WaitingForWave
		}
		return a
	}
	return s.current(namespace)
}

// ForAdmission is the revision an admission computes a group's effective
// spec against, given the boundaries-hash the group carries (the
// controller's request: the one it asks for; anyone else's: the one the
// group runs). A hash no known revision gives, or none (a create), gets
// Entry. ok is false in that case.
func (s State) ForAdmission(hash, namespace string) (Assignment, bool) {
	if a, ok := s.Running(hash, namespace); ok {
		return a, true
	}
	return s.Entry(namespace), false
}

// Desired is the revision the fan-out re-admits the group
// namespace/name, which carries boundaries-hash hash, against:
//   - without a ConfigMap, a rollout policy or a record, in an excluded
//     namespace, or once the rollout is Complete: the current revision;
//   - in a Progressing rollout, a group of a started wave (any group once
//     the last wave started): the current revision (the target);
//   - in a Progressing rollout, a group its tenant deferred: the revision
//     it runs; one its tenant moved ahead of (or after) its wave: the
//     current revision;
//   - a group rollback moved back: the stable revision;
//   - otherwise the revision it runs (no move), or the stable one when
//     that is unknown.
//
// A group held back has Pending and Reason set.
func (s State) Desired(namespace, name, hash string) Assignment {
	rec := s.Record
	if s.Config == nil || s.Policy() == nil || rec == nil || s.Config.Excluded(namespace) {
		return s.current(namespace)
	}
	key := namespace + "/" + name
	running, known := s.Running(hash, namespace)
	hold := func(reason string) Assignment {
		a := running
		if !known {
			if a, known = s.assign(rec.Stable, namespace); !known {
				return s.current(namespace)
			}
		}
		if a.Revision == s.Revision {
			return a
		}
		a.Pending, a.Reason = s.Revision, reason
		return a
	}
	wave := func(a Assignment) Assignment {
		if i := rec.WaveOf(key); i >= 0 {
			a.Wave = rec.Waves[i].Name
		}
		return a
	}
	if rec.Target != s.Revision {
		return hold(WaitingForRollout)
	}
	switch rec.Phase {
	case record.PhaseComplete:
		return s.current(namespace)
	case record.PhaseProgressing:
		if rec.IsDeferred(key) {
			return hold(DeferredByTenant)
		}
		if where := rec.TenantMoved(key); where != "" {
			a := s.current(namespace)
			a.Wave = where
			return a
		}
		if rec.WaveOf(key) >= 0 || rec.LastWaveStarted() {
			a := s.current(namespace)
			if rec.LastWaveStarted() {
				a.Wave = rec.Waves[rec.Wave].Name
			}
			return wave(a)
		}
		return hold(WaitingForWave)
	case record.PhaseRolledBack:
		if rec.IsRolledBack(key) {
			if a, ok := s.assign(rec.Stable, namespace); ok && a.Revision != s.Revision {
				a.Pending, a.Reason = s.Revision, RolledBack
				return wave(a)
			}
		}
		return wave(hold(RolloutHalted))
	default: // Halted
		return wave(hold(RolloutHalted))
	}
}
