package boundaries

import (
	"reflect"
	"strings"
	"testing"
)

func TestValidatePathAccepts(t *testing.T) {
	for _, p := range []string{
		"spec.provisioner",
		"spec.strategy",
		"spec.strategy.type",
		"spec.strategy.rollingUpdate.maxUnavailable",
		"spec.strategy.crd.statusJSONPath",
		"spec.eks",
		"spec.eks.minSize",
		"spec.eks.warmPool.maxSize",
		"spec.eks.configuration",
		"spec.eks.configuration.image",
		"spec.eks.configuration.bootstrapArguments",
		"spec.eks.configuration.bootstrapOptions.maxPods",
		"spec.eks.configuration.labels",
		"spec.eks.configuration.tags",
		"spec.eks.configuration.taints",
		"spec.eks.configuration.volumes",
		"spec.eks.configuration.userData",
		"spec.eks.configuration.lifecycleHooks",
		"spec.eks.configuration.mixedInstancesPolicy.instanceTypes",
		"spec.eks.configuration.mixedInstancesPolicy.spotRatio",
		"spec.eks.configuration.metadataOptions.httpTokens",
		"spec.eks.configuration.placement.tenancy",
		"spec.eks-managed.configuration.nodeRole",
		"spec.eks-managed.configuration.instanceTypes",
		"spec.eks-fargate.selectors",
		"spec.eks-fargate.tags",
	} {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v", p, err)
		}
	}
}

func TestValidatePathRejects(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"spec.eks.configuration.imag", `unknown path "spec.eks.configuration.imag": spec.eks.configuration has no field "imag" (valid: image, `},
		{"spec.eks.configuration.Image", `spec.eks.configuration has no field "Image" (valid: image, `},
		{"spec.eks.configration.image", `spec.eks has no field "configration" (valid: configuration, `},
		{"spec.provisoner", `spec has no field "provisoner" (valid: provisioner, `},
		{"spec.eks.configuration.l\u0430bels", "has no field \"l\u0430bels\" (it contains the non-ASCII character '\u0430', U+0430, at byte 1; field names are ASCII) (valid: labels, "},
		{"spec.status", `spec has no field "status"`},
		{"", `unknown path "": paths start at the object root with "spec."`},
		{"metadata.name", `unknown path "metadata.name": paths start at the object root with "spec."`},
		{"eks.configuration.image", `paths start at the object root with "spec."`},
		{"spec", `unknown path "spec": name a field below spec (valid: `},
		{"spec.", `unknown path "spec.": empty field name after spec`},
		{"spec..eks", `empty field name after spec`},
		{"spec.eks.", `empty field name after spec.eks`},
		{" spec.eks", `paths start at the object root`},
		{"spec.eks.configuration.labels.team", `spec.eks.configuration.labels is a map; a path cannot name its keys`},
		{"spec.eks.configuration.tags.key", `spec.eks.configuration.tags is a list; a path cannot go into its elements`},
		{"spec.eks.configuration.volumes.0", `spec.eks.configuration.volumes is a list`},
		{"spec.eks.configuration.image.id", `spec.eks.configuration.image is a string and has no fields`},
		{"spec.eks.minSize.x", `spec.eks.minSize is an integer and has no fields`},
		{"spec.strategy.rollingUpdate.maxUnavailable.x", `is a value of type intstr.IntOrString and has no fields`},
	} {
		err := ValidatePath(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidatePath(%q) = %v\nwant an error containing %q", tc.path, err, tc.want)
		}
	}
}

// The suggestions put the closest names first and are capped.
func TestNearest(t *testing.T) {
	got := nearest("imag", []string{"clusterName", "image", "instanceType", "bootstrapArguments", "a", "b", "c", "d", "e", "f", "g"})
	want := "image, a, g, b, c, d, e, f, ..." // a and g share a letter with "imag"
	if got != want {
		t.Errorf("nearest = %q, want %q", got, want)
	}
	if got := nearest("x", []string{"b", "a"}); got != "a, b" {
		t.Errorf("nearest = %q", got)
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"imag", "image", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

type schemaEmbedded struct {
	E string `json:"e"`
}

// schemaProbe has every kind of field the schema walk handles, beyond what
// the API uses today.
type schemaProbe struct {
	schemaEmbedded
	U      uint8        `json:"u"`
	I8     int8         `json:"i8"`
	F      float64      `json:"f"`
	B      bool         `json:"b"`
	Any    any          `json:"any"`
	Self   *schemaProbe `json:"self,omitempty"`
	Arr    [2]string    `json:"arr"`
	NoTag  string
	Skip   string `json:"-"`
	hidden string //nolint:unused // must not become a field
}

func TestCheckValueSchemaKinds(t *testing.T) {
	n := buildSchema(reflect.TypeOf(schemaProbe{}), map[reflect.Type]*schemaNode{})
	if got := strings.Join(n.names, ","); got != "NoTag,any,arr,b,e,f,i8,self,u" {
		t.Fatalf("fields = %s", got)
	}
	var problems []string
	ok := canon(t, specOf(t, `{e: x, u: 255, i8: -128, f: 1.5, b: true, any: [1, {a: b}], self: {self: {u: 0}}, arr: [a, b], NoTag: text}`))
	checkValue(n, ok, "p", &problems)
	if len(problems) != 0 {
		t.Fatalf("valid value rejected: %v", problems)
	}
	bad := canon(t, specOf(t, `{e: 1, u: 256, i8: 200, f: x, b: 1, self: {u: -1, Skip: z}, arr: x, hidden: 1}`))
	checkValue(n, bad, "p", &problems)
	want := []string{
		"p.arr: expected a list, got a string",
		"p.b: expected a boolean, got a number",
		"p.e: expected a string, got a number",
		"p.f: expected a number, got a string",
		`p: unknown field "hidden" (valid: `,
		"p.i8: 200 is out of range for int8",
		`p.self: unknown field "Skip" (valid: `,
		"p.self.u: -1 is out of range for uint8",
		"p.u: 256 is out of range for uint8",
	}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d = %q, want %q", i, problems[i], w)
		}
	}
}
