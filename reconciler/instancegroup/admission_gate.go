package instancegroup

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Reasons of the Ready condition of a group the controller does not act on
// because it was not admitted under the boundaries in force.
const (
	// ReasonNotAdmitted: the group carries no boundaries-hash annotation,
	// so it never went through instance-manager's mutating webhook (the
	// webhooks were unavailable or bypassed when it was stored): its spec
	// is whatever was sent, not the effective spec.
	ReasonNotAdmitted = "NotAdmitted"
	// ReasonBoundariesStale: the group's spec was computed from other
	// boundaries than those in force; the fan-out re-admits it.
	ReasonBoundariesStale = "BoundariesStale"
	// ReasonBoundariesNotLoaded: the boundary ConfigMap has not been read
	// yet (the first seconds after a start).
	ReasonBoundariesNotLoaded = "BoundariesNotLoaded"
)

// admissionGate says why ig must not be acted on (created, changed,
// rotated) now, or "" when it may: the stored spec must be the one the
// mutating webhook computed under the boundaries in force, which the
// boundaries-hash annotation it writes attests. A group without the
// annotation was stored while the webhooks were unavailable or bypassed;
// one with another hash waits for the fan-out (fanout.Reconciler), whose
// update recomputes its spec and hash, and is acted on then. Deletion is
// never gated: it only removes what the group owns.
//
// Without a boundary ConfigMap (fail closed) the groups keep the spec
// computed from the last boundaries, so only a missing hash is refused;
// in open mode (allowNoBoundaries) the hash of no boundaries is expected.
// With a progressive rollout, in force for a group is the revision the
// rollout assigns it (store.State.Desired): groups of later waves keep the
// previous revision on purpose, and are checked against it.
//
// violations, when set, re-checks the stored spec against the boundaries
// in force (boundaries.Violations, the validating webhook's re-check): a
// spec changed while the webhooks were bypassed keeps its hash, so the
// hash alone does not attest it.
func admissionGate(ig *v1alpha1.InstanceGroup, st store.State, allowNoBoundaries bool, violations Violations) (reason, msg string) {
	if !st.Loaded {
		return ReasonBoundariesNotLoaded, "Waiting for the boundary ConfigMap to be read"
	}
	hash, ok := ig.Annotations[v1alpha1.AnnotationBoundariesHash]
	if !ok || hash == "" {
		return ReasonNotAdmitted, fmt.Sprintf("The group was stored without instance-manager's admission (no %s annotation: its webhooks were "+
			"unavailable or bypassed), so its spec may not respect the boundaries; nothing is created or changed for it until the fan-out "+
			"re-admits it", v1alpha1.AnnotationBoundariesHash)
	}
	if st.Config == nil && !allowNoBoundaries {
		return "", ""
	}
	// The revision in force for this group: with a progressive rollout,
	// groups of later waves (and groups rolled back) keep an earlier
	// revision on purpose (store.State.Desired).
	assigned := st.Desired(ig.Namespace, ig.Name, hash)
	if want := assigned.Hash; hash != want {
		msg := fmt.Sprintf("The spec was computed from other boundaries (hash %s) than those in force for the group (hash %s); "+
			"nothing is created or changed for the group until the fan-out re-admits it", hash, want)
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied); readmissionRefused(ig) {
			msg += "; its re-admission was refused: " + c.Message
		}
		return ReasonBoundariesStale, msg
	}
	if violations != nil && assigned.Config != nil {
		problems, err := violations(assigned.Config, ig)
		if err != nil {
			return ReasonNotAdmitted, fmt.Sprintf("The stored spec cannot be checked against the boundaries (%v); nothing is created or changed "+
				"for the group until it is re-admitted", err)
		}
		if len(problems) > 0 {
			return ReasonNotAdmitted, fmt.Sprintf("The stored spec is not what the boundaries give (%s): it was changed without "+
				"instance-manager's admission (its webhooks were unavailable or bypassed); nothing is created or changed for the group "+
				"until it is re-admitted", strings.Join(problems, "; "))
		}
	}
	return "", ""
}

// Violations lists where a group's stored spec differs, on restricted
// paths, from what cfg gives for its kept submission: boundaries.Violations
// with the boundary ConfigMap's namespace (BoundaryViolations).
type Violations func(cfg *boundaries.Config, ig *v1alpha1.InstanceGroup) ([]string, error)

// BoundaryViolations is the Violations of the boundaries package for a
// boundary ConfigMap in adminNamespace, whose groups get its rules as
// written: the same re-check the validating webhook makes.
func BoundaryViolations(adminNamespace string) Violations {
	return func(cfg *boundaries.Config, ig *v1alpha1.InstanceGroup) ([]string, error) {
		return boundaries.Violations(cfg, ig, nil, adminNamespace)
	}
}

// readmissionRefused reports whether the fan-out's last re-admission of ig
// was refused by the webhooks (BoundariesApplied False, reason Rejected):
// the fan-out retries it with backoff (readmitRetry).
func readmissionRefused(ig *v1alpha1.InstanceGroup) bool {
	c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Rejected"
}
