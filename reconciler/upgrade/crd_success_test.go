package upgrade

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A resource that reports success ends the upgrade only once the group's
// instances run the version it was submitted for: its controller replaced
// them itself, and the listing the strategy judges from may predate that
// work (or Auto Scaling may still hold the old ones in Terminating:Wait).
func TestCRDSuccessWaitsForTheGroupsInstances(t *testing.T) {
	res := &unstructured.Unstructured{}
	res.SetGroupVersionKind(ruGVK)
	res.SetNamespace("team-a")
	res.SetName("rollup-nodes")
	res.SetLabels(map[string]string{LabelTemplateVersion: "2"})
	if err := unstructured.SetNestedField(res.Object, "completed", "status", "currentStatus"); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		p       Progress
		leaving []string
		done    bool
		message string
	}{
		"none replaced yet": {Progress{Updated: 0, Total: 2}, nil, false, `RollingUpgrade rollup-nodes reports "completed"; waiting for the group's instances to run launch template version 2 (0 of 2 do)`},
		"one replaced":      {Progress{Updated: 1, Total: 2}, nil, false, "(1 of 2 do)"},
		"old ones still terminating": {Progress{Updated: 2, Total: 2}, []string{"i-1", "i-2"}, false,
			`reports "completed"; waiting for 2 replaced instance(s) to finish terminating: i-1, i-2`},
		"all replaced and gone": {Progress{Updated: 2, Total: 2}, nil, true, ""},
		"an empty group":        {Progress{}, nil, true, ""},
	} {
		s, _ := confinedStrategy()
		got, err := s.follow(context.Background(), crdGroup("team-a", ruTemplate), res, tc.p, tc.leaving)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Done != tc.done || !strings.Contains(got.Message, tc.message) {
			t.Errorf("%s: follow = done %v, %q; want done %v, %q", name, got.Done, got.Message, tc.done, tc.message)
		}
	}
}
