package webhooks

import (
	"testing"

	"github.com/google/cel-go/cel"
)

// The match condition's truth table, evaluated with CEL as the API server
// does (variables request, object, oldObject; oldObject null on CREATE):
// false (the webhooks are not called) only for an update of a deleting
// group that changes neither spec nor annotations; never an error.
func TestNotMetadataOnDeletingCallsTheWebhooksForAllButMetadataOfADeletingGroup(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(notMetadataOnDeleting.Expression)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"eks": map[string]any{"minSize": int64(0), "maxSize": int64(2)}}
	group := func(deleting bool, finalizers []any, annotations map[string]any, spec map[string]any) map[string]any {
		md := map[string]any{"name": "a", "namespace": "team", "finalizers": finalizers}
		if deleting {
			md["deletionTimestamp"] = "2026-11-26T18:00:00Z"
		}
		if annotations != nil {
			md["annotations"] = annotations
		}
		o := map[string]any{"metadata": md}
		if spec != nil {
			o["spec"] = spec
		}
		return o
	}
	fin := []any{"instancemgr.keikoproj.io/finalizer"}
	ann := map[string]any{"instancemgr.keikoproj.io/boundaries-hash": "h1"}
	for _, c := range []struct {
		name          string
		op            string
		old, obj      map[string]any
		callsWebhooks bool
	}{
		{"create", "CREATE", nil, group(false, nil, nil, spec), true},
		{"update of a live group", "UPDATE", group(false, fin, ann, spec), group(false, fin, ann, spec), true},
		{"finalizer release of a deleting group", "UPDATE", group(true, fin, ann, spec), group(true, []any{}, ann, spec), false},
		{"finalizer release, no annotations, no spec", "UPDATE", group(true, fin, nil, nil), group(true, nil, nil, nil), false},
		{"spec change of a deleting group", "UPDATE", group(true, fin, ann, spec), group(true, fin, ann, map[string]any{"eks": map[string]any{"maxSize": int64(3)}}), true},
		{"spec removed from a deleting group", "UPDATE", group(true, fin, ann, spec), group(true, fin, ann, nil), true},
		{"annotation added to a deleting group", "UPDATE", group(true, fin, nil, spec), group(true, fin, map[string]any{"instancemgr.keikoproj.io/force-delete": "true"}, spec), true},
		{"annotation changed on a deleting group", "UPDATE", group(true, fin, ann, spec), group(true, fin, map[string]any{"instancemgr.keikoproj.io/boundaries-hash": "h2"}, spec), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var old any // null on CREATE, as the API server binds it
			if c.old != nil {
				old = c.old
			}
			out, _, err := prg.Eval(map[string]any{"request": map[string]any{"operation": c.op}, "object": c.obj, "oldObject": old})
			if err != nil {
				t.Fatalf("the expression errors (the API server would apply failurePolicy Fail): %v", err)
			}
			if got := out.Value() == true; got != c.callsWebhooks {
				t.Errorf("match = %v, want %v", got, c.callsWebhooks)
			}
		})
	}
}
