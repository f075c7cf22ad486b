package boundaries

import (
	"reflect"
	"testing"
)

func TestDefaultsDiff(t *testing.T) {
	parse := func(defaults, conditionals string) *Config {
		t.Helper()
		data := map[string]string{}
		if defaults != "" {
			data["defaults"] = defaults
		}
		if conditionals != "" {
			data["conditionals"] = conditionals
		}
		c, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	image := func(ami string) string { return "spec:\n  eks:\n    configuration:\n      image: " + ami + "\n" }
	for _, tc := range []struct {
		name     string
		old, new *Config
		want     []FieldChange
	}{
		{"same", parse(image("ami-a"), ""), parse(image("ami-a"), ""), nil},
		{"image changes", parse(image("ami-a"), ""), parse(image("ami-b"), ""),
			[]FieldChange{{Path: "spec.eks.configuration.image", Old: "ami-a", New: "ami-b"}}},
		{"no old config", nil, parse(image("ami-b"), ""),
			[]FieldChange{{Path: "spec.eks.configuration.image", New: "ami-b"}}},
		{"added and removed, sorted", parse(image("ami-a")+"      volumes: [{name: /dev/xvda, size: 50, type: gp3}]\n", ""),
			parse(image("ami-a")+"      labels: {node.kubernetes.io/role: worker}\n", ""),
			[]FieldChange{
				{Path: "spec.eks.configuration.labels[node.kubernetes.io/role]", New: "worker"},
				{Path: "spec.eks.configuration.volumes", Old: `[{"name":"/dev/xvda","size":50,"type":"gp3"}]`},
			}},
		{"conditional", parse(image("ami-a"), "- annotationSelector: team=a\n  defaults:\n    spec:\n      eks:\n        maxSize: 3\n"),
			parse(image("ami-a"), "- annotationSelector: team=a\n  defaults:\n    spec:\n      eks:\n        maxSize: 5\n"),
			[]FieldChange{{Path: "conditionals[team=a].spec.eks.maxSize", Old: "3", New: "5"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultsDiff(tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DefaultsDiff = %#v\nwant %#v", got, tc.want)
			}
		})
	}
	if got := (FieldChange{Path: "p", New: "b"}).String(); got != "p: (none) -> b" {
		t.Errorf("String = %q", got)
	}
}
