package boundaries

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// SpecError is returned by DecodeSpec: every problem found in the spec, each
// naming its field path (spec.eks.configuration.volumes[0].size: ...).
type SpecError struct {
	Problems []string
}

func (e *SpecError) Error() string { return joinProblems("invalid spec", e.Problems) }

// joinProblems renders a list of problems as one message.
func joinProblems(what string, problems []string) string {
	if len(problems) == 1 {
		return what + ": " + problems[0]
	}
	return fmt.Sprintf("%s (%d problems): %s", what, len(problems), strings.Join(problems, "; "))
}

// DecodeSpec strictly decodes spec, the value of an InstanceGroup's .spec,
// into v1alpha1.InstanceGroupSpec. Unknown fields and values of the wrong
// JSON type are errors; all of them are reported at once in a *SpecError,
// each naming its path from "spec". A nil map decodes to the zero spec. It
// checks shape only: whether the spec can work (sizes, provisioner section,
// strategy) is the validating webhook's business.
func DecodeSpec(spec map[string]any) (*v1alpha1.InstanceGroupSpec, error) {
	out, problems := decodeSpecValue(spec, "spec")
	if len(problems) > 0 {
		return nil, &SpecError{Problems: problems}
	}
	return out, nil
}

// decodeSpecValue checks v against the InstanceGroupSpec schema and decodes
// it, returning the problems found, each prefixed by path.
func decodeSpecValue(v any, path string) (*v1alpha1.InstanceGroupSpec, []string) {
	n, err := normalize(v, path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var problems []string
	checkValue(instanceGroupSpecSchema(), n, path, &problems)
	if len(problems) > 0 {
		return nil, problems
	}
	// The walk above gives the messages; decoding with the real types is the
	// backstop that keeps this function honest about what the API accepts.
	raw, err := json.Marshal(n)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	out := &v1alpha1.InstanceGroupSpec{}
	if n == nil {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	return out, nil
}
