package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
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

// Handle implements admission.Handler.
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
	}
	if state.Config == nil && !m.AllowNoBoundaries {
		var nilConfig *boundaries.Config
		if req.Operation == admissionv1.Update && reflect.DeepEqual(normalize(old.spec()), normalize(obj.spec())) &&
			(isController || len(nilConfig.RestrictedAnnotations(old.annotations(), obj.annotations())) == 0) {
			// Metadata only (finalizers, labels): nothing is recomputed,
			// so no boundary is lost.
			return admission.Allowed("")
		}
		return admission.Denied(fmt.Sprintf("%s: the boundary ConfigMap %s does not exist, so InstanceGroups are refused (boundaries fail closed); "+
			"the cluster admin creates it, or runs instance-manager with --allow-no-boundaries (chart value allowNoBoundaries: true) to admit groups as submitted", ref, m.ConfigMap))
	}
	// The boundaries revision this admission computes against: the one
	// the controller asks for (the hash its update carries), the one the
	// group runs (anyone else's update: a tenant's edit during a rollout
	// keeps its group's revision), or for a new group the revision new
	// groups get (store.State.Entry).
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
		// The controller asks for a revision this replica has not loaded
		// yet (the rollout record is on its way through the watch).
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("%s: the boundaries revision with hash %s is not loaded on this replica yet; retry in a few seconds", ref, hash))
	}
	cfg := assigned.Config
	excluded := cfg.Excluded(req.Namespace)

	submitted, oldSubmitted, err := m.submittedSpec(req, obj, isController)
	if errors.Is(err, errStale) {
		return staleResponse(ref, req)
	}
	if err != nil {
		return admission.Denied(fmt.Sprintf("%s: %v", ref, err))
	}
	NormalizeSpellings(submitted) // keikoproj spellings (rollingupdate, Launch, ...) compare and merge as canonical
	// The annotation keeps the tenant's forms (eks-fargate.tags as a list
	// of maps); the effective spec is computed from ours.
	submittedJSON, err := json.Marshal(submitted)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if errs := NormalizeForms(submitted); len(errs) > 0 {
		return admission.Denied(fmt.Sprintf("%s is invalid: %s", ref, errs.ToAggregate().Error()))
	}
	if oldSubmitted != nil {
		NormalizeForms(oldSubmitted) // compared with the new overrides below; its problems were answered when it was kept
	}
	var warnings []string
	if !isController && !state.Config.Excluded(req.Namespace) && state.Config != nil && req.Namespace != m.ConfigMap.Namespace {
		// Which annotations tenants may set is the newest admin word.
		w, deny := m.behaviourAnnotations(state.Config, old, obj)
		if deny != "" {
			return admission.Denied(ref + ": " + deny)
		}
		warnings = append(warnings, w...)
	}
	res, err := cfg.Effective(boundaries.Input{
		Spec: submitted, Annotations: obj.annotations(), NamespaceExcluded: excluded, AdminNamespace: req.Namespace == m.ConfigMap.Namespace, Namespace: req.Namespace,
	})
	if err != nil {
		return admission.Denied(fmt.Sprintf("%s: computing the effective spec from ConfigMap %s: %v", ref, m.ConfigMap, err))
	}
	NormalizeSpellings(res.Spec)

	overrides := res.Overrides
	if req.Operation == admissionv1.Update {
		// Only what the tenant sets now is enforced: an override already
		// in the kept submission was answered when it was made.
		overrides = newOverrides(overrides, oldSubmitted)
	}
	if len(overrides) > 0 && !isController {
		if cfg.Enforcement == boundaries.EnforcementDeny {
			return admission.Denied(m.denyMessage(ref, cfg, overrides))
		}
		for _, o := range overrides {
			msg := fmt.Sprintf("%s is restricted by ConfigMap %s: the submitted value %s was replaced by %s",
				o.Path, m.ConfigMap, compact(o.Submitted), compact(o.Enforced))
			if o.Removed() {
				msg = fmt.Sprintf("%s is restricted by ConfigMap %s%s and has no default: the submitted value %s was removed",
					o.Path, m.ConfigMap, sensitiveNote(cfg, o.Path), compact(o.Submitted))
			}
			warnings = append(warnings, msg)
			if m.Recorder != nil && !isDryRun(req) {
				m.Recorder.Eventf(obj.reference(req.Namespace), nil, corev1.EventTypeWarning, ReasonRestrictedOverride, "Admission", "%s", msg)
			}
		}
	}
	if p, _ := res.Spec["provisioner"].(string); p == v1alpha1.ProvisionerEKSCF {
		warnings = append(warnings, `spec.provisioner: "eks-cf" is deprecated; the group is built by the "eks" provisioner from spec.eks`)
	}

	obj.setSpec(res.Spec)
	obj.setAnnotation(v1alpha1.AnnotationSubmittedSpec, string(submittedJSON))
	obj.setAnnotation(v1alpha1.AnnotationBoundariesHash, res.Hash)
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated).WithWarnings(warnings...)
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
				o.Path, m.ConfigMap, sensitiveNote(cfg, o.Path), compact(o.Submitted)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s is restricted by ConfigMap %s (allowed value: %s; submitted: %s)",
			o.Path, m.ConfigMap, compact(o.Enforced), compact(o.Submitted)))
	}
	return ref + ": " + strings.Join(parts, "; ") + "; remove the field or ask the cluster admin"
}

// newOverrides drops overrides whose submitted value was already in the
// kept submission.
func newOverrides(overrides []boundaries.Override, oldSubmitted map[string]any) []boundaries.Override {
	var out []boundaries.Override
	for _, o := range overrides {
		old, ok := lookup(map[string]any{"spec": oldSubmitted}, o.Path)
		if ok && reflect.DeepEqual(normalize(old), normalize(o.Submitted)) {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// sensitiveNote explains a restriction the ConfigMap does not write
// itself: a sensitive path, admin-only unless shared.
func sensitiveNote(cfg *boundaries.Config, path string) string {
	if cfg.Names(path) {
		return ""
	}
	return " (a security-sensitive path, admin-only unless the ConfigMap shares it)"
}

// behaviourAnnotations enforces the ConfigMap's sharedAnnotations on the
// behaviour annotations the request adds, changes or removes: in deny mode
// it returns the refusal; in warn mode it puts the stored values back on
// obj and returns the warnings.
func (m *InstanceGroupMutator) behaviourAnnotations(cfg *boundaries.Config, old, obj object) ([]string, string) {
	var oldAnn map[string]string
	if old != nil {
		oldAnn = old.annotations()
	}
	keys := cfg.RestrictedAnnotations(oldAnn, obj.annotations())
	if len(keys) == 0 {
		return nil, ""
	}
	if cfg.Enforcement == boundaries.EnforcementDeny {
		return nil, fmt.Sprintf("metadata.annotations %s are restricted by ConfigMap %s (list them in its sharedAnnotations to let tenants set them); remove the change or ask the cluster admin",
			strings.Join(keys, ", "), m.ConfigMap)
	}
	var warnings []string
	for _, k := range keys {
		if v, ok := oldAnn[k]; ok {
			obj.setAnnotation(k, v)
		} else {
			obj.deleteAnnotation(k)
		}
		warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s] is restricted by ConfigMap %s (not in its sharedAnnotations): the change was dropped", k, m.ConfigMap))
	}
	return warnings, ""
}

// deletingAnnotations answers an update of a group being deleted: the
// behaviour annotations it changes are restricted as for any update
// (sharedAnnotations; with no ConfigMap, only in open mode); everything
// else goes through.
func (m *InstanceGroupMutator) deletingAnnotations(req admission.Request, ref string, cfg *boundaries.Config, isController bool, old, obj object) admission.Response {
	if isController || req.Namespace == m.ConfigMap.Namespace || cfg.Excluded(req.Namespace) {
		return admission.Allowed("")
	}
	if cfg == nil {
		if m.AllowNoBoundaries {
			return admission.Allowed("")
		}
		if keys := cfg.RestrictedAnnotations(old.annotations(), obj.annotations()); len(keys) > 0 {
			return admission.Denied(fmt.Sprintf("%s: metadata.annotations %s are restricted and the boundary ConfigMap %s does not exist (boundaries fail closed); ask the cluster admin",
				ref, strings.Join(keys, ", "), m.ConfigMap))
		}
		return admission.Allowed("")
	}
	warnings, deny := m.behaviourAnnotations(cfg, old, obj)
	if deny != "" {
		return admission.Denied(ref + ": " + deny)
	}
	if len(warnings) == 0 {
		return admission.Allowed("")
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated).WithWarnings(warnings...)
}

func isDryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// normalize round-trips through JSON so typed and decoded values compare equal.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// lookup walks a dot path through decoded JSON objects.
func lookup(root map[string]any, path string) (any, bool) {
	var cur any = root
	for _, seg := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}
