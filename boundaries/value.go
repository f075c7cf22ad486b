package boundaries

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// normalize returns a deep copy of v in canonical JSON form: map[string]any,
// []any, string, bool, int64 (every integral number that fits), float64 and
// nil. Object entries whose value is JSON null are dropped, because null
// counts as absent everywhere in BOUNDARIES.md; nulls inside lists are kept.
// path names v in errors, for values that have no JSON form (NaN, channels).
func normalize(v any, path string) (any, error) {
	n, err := canonical(v)
	if err != nil {
		return nil, err.withPrefix(path)
	}
	return n, nil
}

// valueError is a normalization error; its path is built on the way out of
// the recursion, so that the common, successful case builds no strings.
type valueError struct {
	rev []string // path elements, innermost first
	msg string
}

func (e *valueError) at(elem string) *valueError {
	e.rev = append(e.rev, elem)
	return e
}

func (e *valueError) withPrefix(prefix string) error {
	var b strings.Builder
	b.WriteString(prefix)
	for i := len(e.rev) - 1; i >= 0; i-- {
		b.WriteString(e.rev[i])
	}
	return fmt.Errorf("%s: %s", b.String(), e.msg)
}

func canonical(v any) (any, *valueError) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return x, nil
	case bool:
		return x, nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint:
		return normUint(uint64(x)), nil
	case uint64:
		return normUint(x), nil
	case uint32:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case float64:
		return normFloat(x)
	case float32:
		return normFloat(float64(x))
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, &valueError{msg: fmt.Sprintf("%q is not a JSON number", string(x))}
		}
		return normFloat(f)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := canonical(e)
			if err != nil {
				return nil, err.at("." + k)
			}
			if n != nil {
				out[k] = n
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := canonical(e)
			if err != nil {
				return nil, err.at(fmt.Sprintf("[%d]", i))
			}
			out[i] = n
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	default:
		// Typed structs, typed slices and the like: take their JSON form.
		raw, err := json.Marshal(x)
		if err != nil {
			return nil, &valueError{msg: fmt.Sprintf("value of type %T has no JSON form: %v", x, err)}
		}
		var g any
		if err := decodeJSON(raw, &g); err != nil {
			return nil, &valueError{msg: fmt.Sprintf("value of type %T: %v", x, err)}
		}
		return canonical(g)
	}
}

func normUint(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}

// normFloat maps integral floats to int64 so that 2 decoded as float64 (by
// encoding/json) equals 2 decoded as int64 (by the unstructured converter).
func normFloat(f float64) (any, *valueError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &valueError{msg: fmt.Sprintf("%v is not a JSON number", f)}
	}
	if f == math.Trunc(f) && f >= -(1<<63) && f < (1<<63) {
		return int64(f), nil
	}
	return f, nil
}

// decodeJSON decodes one JSON document keeping numbers exact (json.Number),
// rejecting trailing data.
func decodeJSON(raw []byte, into *any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// normalizeObject normalizes v and requires an object (nil stands for {}).
func normalizeObject(v any, path string) (map[string]any, error) {
	n, err := normalize(v, path)
	if err != nil {
		return nil, err
	}
	switch m := n.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("%s: expected an object, got %s", path, kindOf(n))
	}
}

// deepCopy copies a canonical value (see normalize).
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return x
	}
}

// kindOf names the JSON type of a canonical value, for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// CompactJSON renders a value as one line of JSON, for messages and
// identity keys (fmt %v when it does not marshal).
// encoding/json sorts object keys, so equal values render equally.
func CompactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// splitPath splits a dot path into segments.
func splitPath(p string) []string { return strings.Split(p, ".") }

// getPath returns the value at segs below root. Absent intermediates,
// intermediates that are not objects, and null all mean "no value".
func getPath(root map[string]any, segs []string) (any, bool) {
	cur := any(root)
	for _, s := range segs {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[s]
		if !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}

// setPath stores v at segs below root, creating absent (or null)
// intermediate objects. An intermediate that holds a non-object value cannot
// take the field: that is an error naming the intermediate.
func setPath(root map[string]any, segs []string, v any, prefix string) error {
	cur := root
	for i, s := range segs[:len(segs)-1] {
		next, ok := cur[s]
		if !ok || next == nil {
			m := map[string]any{}
			cur[s] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			at := prefix + "." + strings.Join(segs[:i+1], ".")
			return fmt.Errorf("%s: is %s, but %s.%s must be set inside it", at, kindOf(next), prefix, strings.Join(segs, "."))
		}
		cur = m
	}
	cur[segs[len(segs)-1]] = v
	return nil
}

// deletePath removes the value at segs below root, if there is one.
func deletePath(root map[string]any, segs []string) {
	cur := root
	for _, s := range segs[:len(segs)-1] {
		m, ok := cur[s].(map[string]any)
		if !ok {
			return
		}
		cur = m
	}
	delete(cur, segs[len(segs)-1])
}

// equalValues reports whether two canonical values are the same JSON value.
// normalize maps every integral number to int64, so 2 and 2.0 are equal.
func equalValues(a, b any) bool { return reflect.DeepEqual(a, b) }

// SameJSON reports whether a and b encode to the same JSON document: each
// makes a round trip through encoding/json, so typed and decoded values
// compare alike (an int 2 and a float64 2 are equal; an object entry whose
// value is null differs from an absent one, unlike equalValues). A value
// with no JSON form is compared as it is.
func SameJSON(a, b any) bool { return reflect.DeepEqual(roundTrip(a), roundTrip(b)) }

// roundTrip is v encoded and decoded again by encoding/json, or v when it
// has no JSON form.
func roundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
