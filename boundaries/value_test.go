package boundaries

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNormalize(t *testing.T) {
	type typed struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"ints", []any{int(1), int8(-2), int16(3), int32(4), int64(5), uint(6), uint8(7), uint16(8), uint32(9), uint64(10)},
			[]any{int64(1), int64(-2), int64(3), int64(4), int64(5), int64(6), int64(7), int64(8), int64(9), int64(10)}},
		{"uint64 beyond int64", uint64(math.MaxUint64), float64(math.MaxUint64)},
		{"integral floats become int64", []any{float64(3), float32(-2), float64(-0.0), 1e18}, []any{int64(3), int64(-2), int64(0), int64(1e18)}},
		{"other floats stay", []any{1.5, 1e300, float32(0.25)}, []any{1.5, 1e300, 0.25}},
		{"json.Number", []any{json.Number("12"), json.Number("1.5"), json.Number("1e2"), json.Number("99999999999999999999")}, []any{int64(12), 1.5, int64(100), 1e20}},
		{"null entries dropped, list nulls kept", map[string]any{"a": nil, "b": []any{nil, "x"}, "c": map[string]any{"d": nil}}, map[string]any{"b": []any{nil, "x"}, "c": map[string]any{}}},
		{"typed maps and slices", map[string]any{"m": map[string]string{"a": "b"}, "s": []string{"x"}, "l": []map[string]string{{"k": "v"}}}, map[string]any{"m": map[string]any{"a": "b"}, "s": []any{"x"}, "l": []any{map[string]any{"k": "v"}}}},
		{"structs by their JSON form", typed{A: 2}, map[string]any{"a": int64(2)}},
		{"custom marshalers", intstr.FromString("30%"), "30%"},
		{"nil", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalize(tc.in, "x")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]any{"a": []any{1, math.NaN()}}, "x.a[1]: NaN is not a JSON number"},
		{[]any{map[string]any{"b": math.Inf(1)}}, "x[0].b: +Inf is not a JSON number"},
		{map[string]any{"n": json.Number("1x")}, `x.n: "1x" is not a JSON number`},
		{map[string]any{"c": make(chan int)}, "x.c: value of type chan int has no JSON form"},
	} {
		_, err := normalize(tc.in, "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("normalize(%v) err = %v, want %q", tc.in, err, tc.want)
		}
	}
	m := map[string]any{"a": map[string]any{"b": []any{"c"}}}
	got, _ := normalize(m, "x")
	got.(map[string]any)["a"].(map[string]any)["b"].([]any)[0] = "changed"
	if m["a"].(map[string]any)["b"].([]any)[0] != "c" {
		t.Error("normalize does not copy")
	}
}

func TestPathHelpers(t *testing.T) {
	root := map[string]any{"a": map[string]any{"b": "x", "n": nil}, "s": "str"}
	if v, ok := getPath(root, []string{"a", "b"}); !ok || v != "x" {
		t.Errorf("get a.b = %v %v", v, ok)
	}
	for _, p := range [][]string{{"a", "n"}, {"a", "z"}, {"s", "x"}, {"q", "r"}} {
		if v, ok := getPath(root, p); ok {
			t.Errorf("get %v = %v, want absent", p, v)
		}
	}
	if err := setPath(root, []string{"a", "n", "c"}, 1, "spec"); err != nil {
		t.Fatal(err)
	}
	if err := setPath(root, []string{"new", "d"}, 2, "spec"); err != nil {
		t.Fatal(err)
	}
	err := setPath(root, []string{"s", "x", "y"}, 3, "spec")
	if err == nil || err.Error() != "spec.s: is a string, but spec.s.x.y must be set inside it" {
		t.Errorf("set through a string: %v", err)
	}
	deletePath(root, []string{"a", "b"})
	deletePath(root, []string{"s", "x"}) // through a scalar: nothing
	deletePath(root, []string{"q", "r"}) // absent: nothing
	want := map[string]any{"a": map[string]any{"n": map[string]any{"c": 1}}, "s": "str", "new": map[string]any{"d": 2}}
	if !reflect.DeepEqual(root, want) {
		t.Errorf("root = %#v", root)
	}
}
