package boundaries

import (
	"encoding/json"
	"fmt"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Submitted returns the tenant's kept submission of ig (BOUNDARIES.md,
// "Keeping the tenant's intent"): the JSON object in the submitted-spec
// annotation, or the stored spec when the group predates the boundaries,
// with keikoproj instance-manager's forms turned into ours
// (NormalizeForms). Spellings are left as kept. The error is a
// *SubmittedError when the annotation is not a JSON object or its forms
// do not normalise.
func Submitted(ig *v1alpha1.InstanceGroup) (map[string]any, error) {
	raw, ok := ig.Annotations[v1alpha1.AnnotationSubmittedSpec]
	if !ok {
		b, err := json.Marshal(ig.Spec)
		if err != nil {
			return nil, err
		}
		raw = string(b)
	}
	var spec map[string]any
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return nil, &SubmittedError{fmt.Errorf("metadata.annotations[%s] is not a JSON object: %v", v1alpha1.AnnotationSubmittedSpec, err)}
	}
	if errs := NormalizeForms(spec); len(errs) > 0 {
		return nil, &SubmittedError{fmt.Errorf("metadata.annotations[%s]: %v", v1alpha1.AnnotationSubmittedSpec, errs.ToAggregate())}
	}
	return spec, nil
}

// SubmittedError says that a group's kept submission (the submitted-spec
// annotation) cannot be read; its message names the annotation.
type SubmittedError struct{ err error }

func (e *SubmittedError) Error() string { return e.err.Error() }

// Unwrap returns the decoding or normalising error.
func (e *SubmittedError) Unwrap() error { return e.err }
