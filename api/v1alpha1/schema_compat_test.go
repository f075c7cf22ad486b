package v1alpha1

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The schema comparison with keikoproj instance-manager (issue 27): the
// original's spec paths are facts in testdata/original-schema.txt; our CRD
// is the generated config/crd; the deliberate differences are the table of
// docs/compatibility.md, so the page and this test cannot drift apart.

const (
	originalSchemaFile = "testdata/original-schema.txt"
	crdDir             = "../../config/crd"
	readmeFile         = "../../docs/compatibility.md"
	// differencesHeading opens docs/compatibility.md's table of deliberate differences.
	differencesHeading = "### Deliberate differences from keikoproj instance-manager"
)

// typeAny is the type of a schema that accepts any JSON value
// (x-kubernetes-preserve-unknown-fields without a type): the API server
// checks nothing below it, the admission webhooks do.
const typeAny = "any"

func TestOriginalSchemaIsAccepted(t *testing.T) {
	original := readOriginalSchema(t)
	ours := readOurSchema(t)
	listed := readDifferences(t)
	for _, problem := range compareSchemas(original, ours, listed) {
		t.Error(problem)
	}
}

func TestCompareSchemas(t *testing.T) {
	original := map[string]string{
		"spec":             "object",
		"spec.a":           "string",
		"spec.b":           "array",
		"spec.b[]":         "object",
		"spec.b[].*":       "string",
		"spec.c":           "integer",
		"spec.d":           "object",
		"spec.d.e":         "string",
		"spec.f":           "int-or-string",
		"spec.g":           "boolean",
		"spec.g2":          "boolean",
		"spec.renamed":     "integer",
		"spec.other.thing": "string",
	}
	same := map[string]string{}
	for p, ty := range original {
		same[p] = ty
	}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for p, ty := range same {
			out[p] = ty
		}
		for p, ty := range changes {
			if ty == "" {
				delete(out, p)
			} else {
				out[p] = ty
			}
		}
		return out
	}
	tests := []struct {
		name   string
		ours   map[string]string
		listed []string
		want   []string // substrings, one per problem, in order
	}{
		{name: "identical", ours: same},
		{name: "ours has more", ours: with(map[string]string{"spec.extra": "string"})},
		{name: "missing path", ours: with(map[string]string{"spec.c": ""}),
			want: []string{"spec.c (integer in the original) is missing"}},
		{name: "retyped path", ours: with(map[string]string{"spec.b": "object", "spec.b[]": "", "spec.b[].*": "", "spec.b.*": "string"}),
			want: []string{"spec.b is array in the original but object here", "spec.b[] (object in the original) is missing", "spec.b[].* (string in the original) is missing"}},
		{name: "listed path covers its descendants", ours: with(map[string]string{"spec.b": "any", "spec.b[]": "", "spec.b[].*": ""}),
			listed: []string{"spec.b"}},
		{name: "any is a difference to list", ours: with(map[string]string{"spec.b": "any", "spec.b[]": "", "spec.b[].*": ""}),
			want: []string{"spec.b is array in the original but any here", "spec.b[] (object", "spec.b[].* (string"}},
		{name: "listed prefix does not cover a sibling", ours: with(map[string]string{"spec.g2": ""}), listed: []string{"spec.g"},
			want: []string{"spec.g2 (boolean in the original) is missing", "spec.g is listed"}},
		{name: "stale row", ours: same, listed: []string{"spec.a"},
			want: []string{"spec.a is listed in docs/compatibility.md's table of deliberate differences but matches"}},
		{name: "row for a path the original lacks", ours: same, listed: []string{"spec.nothing"},
			want: []string{"spec.nothing is listed in docs/compatibility.md's table of deliberate differences but the original has no such path"}},
		{name: "row for a descendant that differs", ours: with(map[string]string{"spec.d.e": ""}), listed: []string{"spec.d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listed := map[string]string{}
			for _, p := range tt.listed {
				listed[p] = "a reason"
			}
			got := compareSchemas(original, tt.ours, listed)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %q, want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %d is %q, want it to contain %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// compareSchemas returns, in path order, every path of original (path ->
// JSON type) that ours lacks or types differently and that no listed path
// covers (a listed path covers itself and every path below it), then
// every listed spec path that is stale: not in the original, or with
// nothing that differs at or below it.
func compareSchemas(original, ours, listed map[string]string) []string {
	var problems []string
	for _, p := range sortedPaths(original) {
		if coveredBy(p, listed) != "" {
			continue
		}
		want := original[p]
		got, ok := ours[p]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%s in the original) is missing from our CRD: add it, "+
				"or list it with the reason in docs/compatibility.md's table %q", p, want, differencesHeading))
		case got != want:
			problems = append(problems, fmt.Sprintf("%s is %s in the original but %s here: accept the original's form, "+
				"or list it with the reason in docs/compatibility.md's table %q", p, want, got, differencesHeading))
		}
	}
	for _, l := range sortedPaths(listed) {
		if _, ok := original[l]; !ok {
			problems = append(problems, fmt.Sprintf("%s is listed in docs/compatibility.md's table of deliberate differences but the original has no such path", l))
			continue
		}
		differs := false
		for p, want := range original {
			if (p == l || below(p, l)) && ours[p] != want {
				differs = true
				break
			}
		}
		if !differs {
			problems = append(problems, fmt.Sprintf("%s is listed in docs/compatibility.md's table of deliberate differences but matches the original: remove the row", l))
		}
	}
	return problems
}

// coveredBy returns the listed path that is p or above p, or "".
func coveredBy(p string, listed map[string]string) string {
	for l := range listed {
		if p == l || below(p, l) {
			return l
		}
	}
	return ""
}

// below reports whether p is a path under parent (a property, list item
// or map value of it).
func below(p, parent string) bool {
	rest, ok := strings.CutPrefix(p, parent)
	return ok && (strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "["))
}

func sortedPaths(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// readOriginalSchema reads testdata/original-schema.txt: "<path> <type>"
// lines, '#' comments.
func readOriginalSchema(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(originalSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || !strings.HasPrefix(fields[0], "spec") {
			t.Fatalf("%s:%d: %q is not \"<path> <type>\"", originalSchemaFile, n, line)
		}
		out[fields[0]] = fields[1]
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("%s holds %d paths; the original's spec has over 100", originalSchemaFile, len(out))
	}
	return out
}

// readOurSchema walks the spec schema of the InstanceGroup CRD in
// config/crd into path -> JSON type, like readOriginalSchema's file.
func readOurSchema(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want one CRD in %s, got %v (%v)", crdDir, files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != GroupVersion.Version {
			continue
		}
		props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
		spec, ok := props["spec"].(map[string]any)
		if !ok {
			t.Fatalf("%s: version %s has no spec schema", files[0], v.Name)
		}
		out := map[string]string{}
		walkSchema("spec", spec, out)
		return out
	}
	t.Fatalf("%s: no version %s", files[0], GroupVersion.Version)
	return nil
}

// walkSchema records the JSON type of schema s at path and of everything
// below it.
func walkSchema(path string, s map[string]any, out map[string]string) {
	ty, _ := s["type"].(string)
	switch {
	case s["x-kubernetes-int-or-string"] == true:
		ty = "int-or-string"
	case ty == "" && s["x-kubernetes-preserve-unknown-fields"] == true:
		ty = typeAny
	}
	out[path] = ty
	switch ty {
	case "object":
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				walkSchema(path+"."+name, ps, out)
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walkSchema(path+".*", ap, out)
		}
	case "array":
		if items, ok := s["items"].(map[string]any); ok {
			walkSchema(path+"[]", items, out)
		}
	}
}

// readDifferences parses docs/compatibility.md's table of deliberate differences: the
// rows after differencesHeading whose first cell is a `spec...` path, with
// a non-empty last cell (the reason).
func readDifferences(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+differencesHeading+"\n")
	if !ok {
		t.Fatalf("docs/compatibility.md has no section %q", differencesHeading)
	}
	out := map[string]string{}
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the table ended
			}
			if strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if !strings.HasPrefix(first, "spec.") {
			continue
		}
		reason := strings.TrimSpace(cells[len(cells)-1])
		if len(cells) < 2 || reason == "" {
			t.Errorf("docs/compatibility.md's table of deliberate differences: the row of %s gives no reason", first)
		}
		out[first] = reason
	}
	if !inTable {
		t.Fatalf("docs/compatibility.md's section %q has no table", differencesHeading)
	}
	return out
}
