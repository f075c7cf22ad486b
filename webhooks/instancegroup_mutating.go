package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Event reasons emitted on InstanceGroups by admission.
const (
	ReasonRestrictedOverride = "RestrictedFieldOverridden"
	ReasonDeprecated         = "DeprecatedValue"
)

// InstanceGroupMutator is the mutating admission webhook for InstanceGroups
// (BOUNDARIES.md "Computing the effective spec" and "Keeping the tenant's
// intent"). It replaces the submitted spec with the effective spec, keeps the
// tenant's submission in the submitted-spec annotation and the boundaries
// hash in the boundaries-hash annotation, and answers with a JSON patch.
type InstanceGroupMutator struct {
	// Boundaries is the last valid boundary ConfigMap.
	Boundaries *store.Store
	// AllowNoBoundaries admits groups as submitted when the boundary
	// ConfigMap does not exist (--allow-no-boundaries). Off, tenants'
	// creates and spec changes are refused until the admin creates it.
	AllowNoBoundaries bool
	// ControllerUser is the username of the controller's service account,
	// the only user allowed to change the provenance annotations.
	ControllerUser string
	// ConfigMap names the boundary ConfigMap in messages.
	ConfigMap types.NamespacedName
	// Recorder, if set, receives an Event per overridden restricted field.
	Recorder events.EventRecorder
}

// Handle implements admission.Handler. It decodes the request, picks the
// boundaries revision, recovers the tenant's submission, hands the policy
// to boundaries.Admit and answers with its verdict: a refusal, or a patch
// to the effective spec with warnings (and an Event per overridden field).
func (m *InstanceGroupMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	obj, err := decodeObject(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ref := fmt.Sprintf("InstanceGroup %s/%s", req.Namespace, obj.name())
	state := m.Boundaries.Get()
	if !state.Loaded {
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("%s: the boundary ConfigMap %s has not been loaded yet; retry in a few seconds", ref, m.ConfigMap))
	}
	isController := req.UserInfo.Username == m.ControllerUser
	var old object
	var oldAnnotations map[string]string
	if req.Operation == admissionv1.Update {
		if old, err = decodeObject(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if old.deleting() {
			// Nothing is recomputed for a group being deleted: the
			// validating webhook lets metadata changes (finalizers) through
			// and refuses spec changes. The behaviour annotations stay
			// restricted (force-delete changes how the deletion goes).
			return m.deletingAnnotations(req, ref, state.Config, isController, old, obj)
		}
		oldAnnotations = old.annotations()
	}
	if state.Config == nil && !m.AllowNoBoundaries {
		return m.failClosed(req, ref, isController, old, obj)
	}
	cfg, unloaded := m.revision(req, state, isController, old, obj)
	if unloaded != "" {
		// The controller asks for a revision this replica has not loaded
		// yet (the rollout record is on its way through the watch).
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("%s: the boundaries revision with hash %s is not loaded on this replica yet; retry in a few seconds", ref, unloaded))
	}
	submitted, oldSubmitted, err := m.submittedSpec(req, obj, isController)
	if errors.Is(err, errStale) {
		return staleResponse(ref, req)
	}
	if err != nil {
		return admission.Denied(fmt.Sprintf("%s: %v", ref, err))
	}
	a, err := boundaries.Admit(boundaries.AdmitInput{
		Config: cfg, Newest: state.Config, Update: req.Operation == admissionv1.Update,
		Submitted: submitted, OldSubmitted: oldSubmitted, Annotations: obj.annotations(), OldAnnotations: oldAnnotations,
		Namespace: req.Namespace, AdminNamespace: req.Namespace == m.ConfigMap.Namespace, Controller: isController,
	})
	switch {
	case len(a.Invalid) > 0:
		return admission.Denied(fmt.Sprintf("%s is invalid: %s", ref, a.Invalid.ToAggregate().Error()))
	case a.Annotations.Deny:
		return admission.Denied(ref + ": " + m.annotationsRefusal(a.Annotations.Keys))
	case err != nil:
		return admission.Denied(fmt.Sprintf("%s: computing the effective spec from ConfigMap %s: %v", ref, m.ConfigMap, err))
	case a.OverridesDenied:
		return admission.Denied(m.denyMessage(ref, cfg, a.Overrides))
	}
	warnings := m.dropAnnotations(obj, oldAnnotations, a.Annotations.Keys)
	warnings = append(warnings, m.overrideWarnings(req, obj, cfg, a.Overrides)...)
	if p, _ := a.Spec["provisioner"].(string); p == v1alpha1.ProvisionerEKSCF {
		warnings = append(warnings, `spec.provisioner: "eks-cf" is deprecated; the group is built by the "eks" provisioner from spec.eks`)
	}
	obj.setSpec(a.Spec)
	obj.setAnnotation(v1alpha1.AnnotationSubmittedSpec, a.Submitted)
	obj.setAnnotation(v1alpha1.AnnotationBoundariesHash, a.Hash)
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated).WithWarnings(warnings...)
}

// failClosed answers a request while the boundary ConfigMap does not
// exist and --allow-no-boundaries is off: only an update that changes
// metadata (finalizers, labels) and no behaviour annotation goes through,
// since nothing is recomputed, so no boundary is lost.
func (m *InstanceGroupMutator) failClosed(req admission.Request, ref string, isController bool, old, obj object) admission.Response {
	var none *boundaries.Config
	if req.Operation == admissionv1.Update && boundaries.SameJSON(old.spec(), obj.spec()) &&
		(isController || len(none.RestrictedAnnotations(old.annotations(), obj.annotations())) == 0) {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("%s: the boundary ConfigMap %s does not exist, so InstanceGroups are refused (boundaries fail closed); "+
		"the cluster admin creates it, or runs instance-manager with --allow-no-boundaries (chart value allowNoBoundaries: true) to admit groups as submitted", ref, m.ConfigMap))
}

// revision returns the boundaries revision this admission computes
// against: the one the controller asks for (the hash its update carries),
// the one the group runs (anyone else's update: a tenant's edit during a
// rollout keeps its group's revision), or for a new group the revision
// new groups get (store.State.Entry). unloaded is the hash the controller
// asks for when this replica has not loaded it yet ("" otherwise).
func (m *InstanceGroupMutator) revision(req admission.Request, state store.State, isController bool, old, obj object) (cfg *boundaries.Config, unloaded string) {
	var hash string
	switch {
	case req.Operation == admissionv1.Create:
	case isController:
		hash = obj.annotations()[v1alpha1.AnnotationBoundariesHash]
	default:
		hash = old.annotations()[v1alpha1.AnnotationBoundariesHash]
	}
	assigned, known := state.ForAdmission(hash, req.Namespace)
	if isController && !known && hash != "" && hash != old.annotations()[v1alpha1.AnnotationBoundariesHash] {
		return nil, hash
	}
	return assigned.Config, ""
}

// overrideWarnings words the overrides a tenant's request got in warn
// mode, one warning each, and records each as an Event on the group
// (except in a dry run).
func (m *InstanceGroupMutator) overrideWarnings(req admission.Request, obj object, cfg *boundaries.Config, overrides []boundaries.Override) []string {
	var warnings []string
	for _, o := range overrides {
		msg := fmt.Sprintf("%s is restricted by ConfigMap %s: the submitted value %s was replaced by %s",
			o.Path, m.ConfigMap, boundaries.CompactJSON(o.Submitted), boundaries.CompactJSON(o.Enforced))
		if o.Removed() {
			msg = fmt.Sprintf("%s is restricted by ConfigMap %s%s and has no default: the submitted value %s was removed",
				o.Path, m.ConfigMap, sensitiveNote(cfg, o.Path), boundaries.CompactJSON(o.Submitted))
		}
		warnings = append(warnings, msg)
		if m.Recorder != nil && !isDryRun(req) {
			m.Recorder.Eventf(obj.reference(req.Namespace), nil, corev1.EventTypeWarning, ReasonRestrictedOverride, "Admission", "%s", msg)
		}
	}
	return warnings
}

// submittedSpec returns the tenant's intent for this request and the intent
// kept before it (nil on CREATE).
func (m *InstanceGroupMutator) submittedSpec(req admission.Request, obj object, isController bool) (map[string]any, map[string]any, error) {
	if req.Operation == admissionv1.Create {
		if !isController {
			for _, key := range []string{v1alpha1.AnnotationSubmittedSpec, v1alpha1.AnnotationBoundariesHash} {
				if _, ok := obj.annotations()[key]; ok {
					return nil, nil, fmt.Errorf("metadata.annotations[%s] is written by instance-manager only; remove it from the manifest", key)
				}
			}
		}
		return obj.spec(), nil, nil
	}
	old, err := decodeObject(req.OldObject.Raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the stored object: %w", err)
	}
	oldSubmittedJSON, kept := old.annotations()[v1alpha1.AnnotationSubmittedSpec]
	oldSpecJSON, err := json.Marshal(old.spec())
	if err != nil {
		return nil, nil, err
	}
	if !kept {
		// Stored before boundaries applied to it: what is stored is the intent.
		oldSubmittedJSON = string(oldSpecJSON)
	}
	var oldSubmitted map[string]any
	if err := json.Unmarshal([]byte(oldSubmittedJSON), &oldSubmitted); err != nil {
		return nil, nil, fmt.Errorf("metadata.annotations[%s] of the stored object is not a JSON object: %v", v1alpha1.AnnotationSubmittedSpec, err)
	}
	if isController {
		// Re-admission after a boundary change: recompute from the kept intent.
		return oldSubmitted, oldSubmitted, nil
	}
	for _, key := range []string{v1alpha1.AnnotationSubmittedSpec, v1alpha1.AnnotationBoundariesHash} {
		// Dropping an annotation (as server-side apply does for fields it
		// no longer sees) restores it; a different value is a forgery,
		// unless the tenant's copy is stale: the controller re-admitted
		// the group (a boundary change) after the tenant read it. The API
		// server refuses that write with a conflict after admission;
		// refusing it here as a forgery would blame the tenant for the
		// controller's write, so it gets the conflict (clients re-read
		// and retry on it).
		if v, ok := obj.annotations()[key]; ok && v != old.annotations()[key] {
			if rv := obj.resourceVersion(); rv != "" && rv != old.resourceVersion() {
				return nil, nil, errStale
			}
			return nil, nil, fmt.Errorf("metadata.annotations[%s] is written by instance-manager only and cannot be changed by %s", key, req.UserInfo.Username)
		}
	}
	incomingJSON, err := json.Marshal(obj.spec())
	if err != nil {
		return nil, nil, err
	}
	intent, err := boundaries.Intent(oldSpecJSON, incomingJSON, []byte(oldSubmittedJSON))
	if err != nil {
		return nil, nil, fmt.Errorf("computing the submitted spec: %v", err)
	}
	var submitted map[string]any
	if err := json.Unmarshal(intent, &submitted); err != nil {
		return nil, nil, err
	}
	return submitted, oldSubmitted, nil
}

func (m *InstanceGroupMutator) denyMessage(ref string, cfg *boundaries.Config, overrides []boundaries.Override) string {
	parts := make([]string, 0, len(overrides))
	for _, o := range overrides {
		if o.Removed() {
			parts = append(parts, fmt.Sprintf("%s is restricted by ConfigMap %s%s and has no default (allowed: leave it unset; submitted: %s)",
				o.Path, m.ConfigMap, sensitiveNote(cfg, o.Path), boundaries.CompactJSON(o.Submitted)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s is restricted by ConfigMap %s (allowed value: %s; submitted: %s)",
			o.Path, m.ConfigMap, boundaries.CompactJSON(o.Enforced), boundaries.CompactJSON(o.Submitted)))
	}
	return ref + ": " + strings.Join(parts, "; ") + "; remove the field or ask the cluster admin"
}

// sensitiveNote explains a restriction the ConfigMap does not write
// itself: a sensitive path, admin-only unless shared.
func sensitiveNote(cfg *boundaries.Config, path string) string {
	if cfg.Names(path) {
		return ""
	}
	return " (a security-sensitive path, admin-only unless the ConfigMap shares it)"
}

// annotationsRefusal words the refusal of a request that changes the
// restricted behaviour annotations keys in deny mode.
func (m *InstanceGroupMutator) annotationsRefusal(keys []string) string {
	return fmt.Sprintf("metadata.annotations %s are restricted by ConfigMap %s (list them in its sharedAnnotations to let tenants set them); remove the change or ask the cluster admin",
		strings.Join(keys, ", "), m.ConfigMap)
}

// dropAnnotations puts the stored values (old; absent where old has
// none) of the restricted behaviour annotations keys back on obj, as
// boundaries.RevertAnnotations does for the effective spec, and returns a
// warning for each (warn mode).
func (m *InstanceGroupMutator) dropAnnotations(obj object, old map[string]string, keys []string) []string {
	var warnings []string
	for _, k := range keys {
		if v, ok := old[k]; ok {
			obj.setAnnotation(k, v)
		} else {
			obj.deleteAnnotation(k)
		}
		warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s] is restricted by ConfigMap %s (not in its sharedAnnotations): the change was dropped", k, m.ConfigMap))
	}
	return warnings
}

// deletingAnnotations answers an update of a group being deleted: the
// behaviour annotations it changes are restricted as for any update
// (boundaries.Config.JudgeAnnotations; with no ConfigMap, only in open
// mode); everything else goes through.
func (m *InstanceGroupMutator) deletingAnnotations(req admission.Request, ref string, cfg *boundaries.Config, isController bool, old, obj object) admission.Response {
	if isController || req.Namespace == m.ConfigMap.Namespace || cfg.Excluded(req.Namespace) || (cfg == nil && m.AllowNoBoundaries) {
		return admission.Allowed("")
	}
	verdict := cfg.JudgeAnnotations(old.annotations(), obj.annotations())
	switch {
	case verdict.Deny && cfg == nil:
		return admission.Denied(fmt.Sprintf("%s: metadata.annotations %s are restricted and the boundary ConfigMap %s does not exist (boundaries fail closed); ask the cluster admin",
			ref, strings.Join(verdict.Keys, ", "), m.ConfigMap))
	case verdict.Deny:
		return admission.Denied(ref + ": " + m.annotationsRefusal(verdict.Keys))
	case len(verdict.Keys) == 0:
		return admission.Allowed("")
	}
	warnings := m.dropAnnotations(obj, old.annotations(), verdict.Keys)
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated).WithWarnings(warnings...)
}

func isDryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }
