package boundaries

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AdmitInput is one InstanceGroup create or update as the mutating
// webhook decoded it, for Admit.
type AdmitInput struct {
	// Config is the boundaries revision the effective spec is computed
	// against (the group's, during a progressive rollout); nil admits the
	// submission as it is (open mode).
	Config *Config
	// Newest is the newest valid ConfigMap, which says which behaviour
	// annotations tenants may change (its sharedAnnotations); nil judges
	// none.
	Newest *Config
	// Update is true for an UPDATE, false for a CREATE.
	Update bool
	// Submitted is the tenant's submission for this request (the value of
	// .spec, or on an update the tenant's intent, Intent); Admit rewrites
	// its spellings in place.
	Submitted map[string]any
	// OldSubmitted is the submission kept before this update (nil on a
	// create): overrides already in it were answered when it was kept.
	// Admit rewrites its forms in place.
	OldSubmitted map[string]any
	// Annotations and OldAnnotations are the group's annotations in the
	// request and, on an update, in the stored object.
	Annotations, OldAnnotations map[string]string
	// Namespace is the group's namespace.
	Namespace string
	// AdminNamespace is true for the namespace of the boundary ConfigMap.
	AdminNamespace bool
	// Controller is true when instance-manager's controller makes the
	// request (a re-admission after a boundary change): nothing it sends
	// is judged.
	Controller bool
}

// Admission is Admit's verdict. At most one of Invalid, Annotations.Deny
// and OverridesDenied is set; when one is, the request is refused and the
// fields after it are empty.
type Admission struct {
	// Invalid lists the keikoproj forms of the submission that do not
	// normalise (NormalizeForms), with their field paths.
	Invalid field.ErrorList
	// Annotations judges the behaviour annotations the request changes.
	Annotations AnnotationVerdict
	// OverridesDenied is true when the ConfigMap's enforcement is deny and
	// the tenant sets new Overrides.
	OverridesDenied bool
	// Overrides are the restricted paths where the tenant's new value was
	// replaced (or refused, OverridesDenied), sorted by path: those
	// already in the kept submission and those of the controller's
	// requests are left out.
	Overrides []Override
	// Spec is the effective spec with canonical spellings.
	Spec map[string]any
	// Hash is the boundaries-hash annotation for Spec.
	Hash string
	// Submitted is the submitted-spec annotation: compact JSON of the
	// submission with canonical spellings and the tenant's forms.
	Submitted string
}

// Admit is admission's policy for one InstanceGroup create or update
// (BOUNDARIES.md, "Computing the effective spec" and "Keeping the
// tenant's intent"), in this order:
//  1. spell enumerated values canonically (NormalizeSpellings) and keep
//     the submission for its annotation;
//  2. turn keikoproj forms into ours (NormalizeForms; errors: Invalid);
//  3. judge the behaviour annotations a tenant changes against Newest
//     (JudgeAnnotations), skipped for the controller, the admin's
//     namespace and namespaces Newest excludes; in warn mode the changes
//     are dropped before the effective spec is computed;
//  4. compute the effective spec from Config (Config.Effective) and spell
//     it canonically;
//  5. keep the overrides the tenant makes now (not already in
//     OldSubmitted) and, in deny mode, refuse them.
//
// The error is Config.Effective's (the ConfigMap cannot be applied to
// this submission) or one encoding the submission.
func Admit(in AdmitInput) (Admission, error) {
	var out Admission
	NormalizeSpellings(in.Submitted) // keikoproj spellings (rollingupdate, Launch, ...) compare and merge as canonical
	// The annotation keeps the tenant's forms (eks-fargate.tags as a list
	// of maps); the effective spec is computed from ours.
	submittedJSON, err := json.Marshal(in.Submitted)
	if err != nil {
		return out, fmt.Errorf("encoding the submitted spec: %w", err)
	}
	if out.Invalid = NormalizeForms(in.Submitted); len(out.Invalid) > 0 {
		return out, nil
	}
	if in.OldSubmitted != nil {
		NormalizeForms(in.OldSubmitted) // compared with the new overrides below; its problems were answered when it was kept
	}
	annotations := in.Annotations
	if !in.Controller && !in.AdminNamespace && in.Newest != nil && !in.Newest.Excluded(in.Namespace) {
		// Which annotations tenants may set is the newest admin word.
		if out.Annotations = in.Newest.JudgeAnnotations(in.OldAnnotations, in.Annotations); out.Annotations.Deny {
			return out, nil
		}
		annotations = RevertAnnotations(in.OldAnnotations, in.Annotations, out.Annotations.Keys)
	}
	res, err := in.Config.Effective(Input{Spec: in.Submitted, Annotations: annotations, NamespaceExcluded: in.Config.Excluded(in.Namespace),
		AdminNamespace: in.AdminNamespace, Namespace: in.Namespace})
	if err != nil {
		return out, err
	}
	NormalizeSpellings(res.Spec)
	if !in.Controller {
		out.Overrides = res.Overrides
		if in.Update {
			// Only what the tenant sets now is enforced: an override
			// already in the kept submission was answered when it was made.
			out.Overrides = newOverrides(res.Overrides, in.OldSubmitted)
		}
		if len(out.Overrides) > 0 && in.Config != nil && in.Config.Enforcement == EnforcementDeny {
			out.OverridesDenied = true
			return out, nil
		}
	}
	out.Spec, out.Hash, out.Submitted = res.Spec, res.Hash, string(submittedJSON)
	return out, nil
}

// newOverrides drops the overrides whose submitted value was already in
// the kept submission oldSubmitted, and sorts the rest by path.
func newOverrides(overrides []Override, oldSubmitted map[string]any) []Override {
	var out []Override
	for _, o := range overrides {
		old, ok := getPath(map[string]any{"spec": oldSubmitted}, splitPath(o.Path))
		if ok && SameJSON(old, o.Submitted) {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
