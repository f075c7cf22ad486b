package boundaries

import (
	"encoding/json"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Violations lists where a group's stored spec differs, on restricted
// paths, from what cfg gives for its kept submission (Submitted, spellings
// made canonical), one line per path as Config.Verify words them. It
// serves the validating webhook (a mutating webhook after
// instance-manager's changed a restricted path) and the reconciler's
// admission gate (a spec changed while the webhooks were unavailable or
// bypassed).
//
// stored is the spec about to be stored as decoded JSON (the validating
// webhook's request), or nil for ig.Spec (the stored group).
// adminNamespace is the boundary ConfigMap's namespace, whose groups get
// its rules as written. A nil cfg, and groups of the namespaces cfg
// excludes, have none. Errors: a *SubmittedError for an unreadable kept
// submission, else Config.Effective's.
func Violations(cfg *Config, ig *v1alpha1.InstanceGroup, stored map[string]any, adminNamespace string) ([]string, error) {
	if cfg == nil || cfg.Excluded(ig.Namespace) {
		return nil, nil
	}
	submitted, err := Submitted(ig)
	if err != nil {
		return nil, err
	}
	if stored == nil {
		raw, err := json.Marshal(ig.Spec)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &stored); err != nil {
			return nil, err
		}
	}
	NormalizeSpellings(submitted)
	return spelledCanonically(cfg).Verify(Input{Spec: submitted, Annotations: ig.Annotations, AdminNamespace: ig.Namespace == adminNamespace, Namespace: ig.Namespace}, stored)
}

// Recompute returns the effective spec ig gets under cfg from its kept
// submission (Submitted), as admission would store it (canonical
// spellings): what a ConfigMap change would make of an existing group.
// Groups of adminNamespace (the ConfigMap's) get its rules as written, and
// groups of the namespaces cfg excludes keep their submission. Errors are
// Submitted's and Config.Effective's.
func Recompute(cfg *Config, ig *v1alpha1.InstanceGroup, adminNamespace string) (map[string]any, error) {
	submitted, err := Submitted(ig)
	if err != nil {
		return nil, err
	}
	res, err := cfg.Effective(Input{Spec: submitted, Annotations: ig.Annotations, NamespaceExcluded: cfg.Excluded(ig.Namespace),
		AdminNamespace: ig.Namespace == adminNamespace, Namespace: ig.Namespace})
	if err != nil {
		return nil, err
	}
	NormalizeSpellings(res.Spec)
	return res.Spec, nil
}
