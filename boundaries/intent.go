package boundaries

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Intent returns the tenant's new submitted spec on an UPDATE not made by
// the controller (BOUNDARIES.md, "Keeping the tenant's intent"): the JSON
// merge patch (RFC 7386) from oldStored, the stored effective spec, to
// incoming, the spec of the request, applied to oldSubmitted, the spec kept
// in the submitted-spec annotation. All three and the result are JSON of
// .spec; the result is compact with sorted keys and no null object entries.
//
// Empty input or JSON null counts as {} for oldStored and incoming. An empty
// or null oldSubmitted (an object stored before it had the annotation)
// stands for oldStored: what is stored is the best record of intent there
// is. Errors name the argument that is not a JSON object.
//
// Fields the tenant did not touch stay as submitted, so re-applying the
// effective spec, or a server-side apply that drops the defaulted fields,
// leaves the submission unchanged. Lists are replaced whole, as merge
// patches do: editing a merged list in the stored object submits the whole
// list, default elements included.
func Intent(oldStored, incoming, oldSubmitted []byte) ([]byte, error) {
	stored, err := jsonObject(oldStored, "oldStored")
	if err != nil {
		return nil, err
	}
	in, err := jsonObject(incoming, "incoming")
	if err != nil {
		return nil, err
	}
	submitted := stored
	if !isEmptyJSON(oldSubmitted) {
		if submitted, err = jsonObject(oldSubmitted, "oldSubmitted"); err != nil {
			return nil, err
		}
	}
	patch, err := jsonpatch.CreateMergePatch(stored, in)
	if err != nil {
		return nil, fmt.Errorf("intent: merge patch from the stored spec to the incoming one: %w", err)
	}
	merged, err := jsonpatch.MergePatch(submitted, patch)
	if err != nil {
		return nil, fmt.Errorf("intent: applying the tenant's change to the submitted spec: %w", err)
	}
	out, err := jsonObject(merged, "result")
	if err != nil {
		return nil, err
	}
	return out, nil
}

func isEmptyJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// jsonObject checks that b is one JSON object and re-encodes it in canonical
// form (compact, sorted keys, null object entries dropped); empty or null is {}.
func jsonObject(b []byte, what string) ([]byte, error) {
	if isEmptyJSON(b) {
		return []byte("{}"), nil
	}
	var g any
	if err := decodeJSON(b, &g); err != nil {
		return nil, fmt.Errorf("intent: %s is not valid JSON: %w", what, err)
	}
	m, err := normalizeObject(g, what)
	if err != nil {
		return nil, fmt.Errorf("intent: %w", err)
	}
	return json.Marshal(m)
}
