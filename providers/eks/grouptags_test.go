package eks

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestGroupTagsCannotReplaceOwnership(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "u1"},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: "prod",
			Tags: []map[string]string{{"key": TagInstanceGroup, "value": "victim/web"}, {"key": "kubernetes.io/cluster/prod", "value": "shared"}, {"key": "team", "value": "a"}}}}}}
	tags := groupTags(ig, "g")
	want := map[string]string{"Name": "g", "team": "a", TagInstanceGroup: "team-a/web", "instancemgr.keikoproj.io/uid": "u1",
		"instancemgr.keikoproj.io/cluster/prod": "owned", "kubernetes.io/cluster/prod": "owned"}
	if !reflect.DeepEqual(tags, want) {
		t.Fatalf("groupTags = %v, want %v", tags, want)
	}
}

func TestOnlyRecordedTagsAreRemoved(t *testing.T) {
	long := strings.Repeat("k", 120)
	cases := []struct {
		name       string
		before     map[string]string // the spec tags applied last time (nil: a group of an earlier version, no record)
		outside    map[string]string // tags someone else added
		now        map[string]string
		wantRemove []string
	}{
		{"a spec tag dropped is removed", map[string]string{"team": "a", "cost": "1"}, nil, map[string]string{"team": "a"}, []string{"cost"}},
		{"someone else's tag stays", map[string]string{"team": "a"}, map[string]string{"backup": "daily"}, map[string]string{"team": "a"}, nil},
		{"no record (earlier version): nothing is removed", nil, map[string]string{"cost": "1"}, map[string]string{"team": "a"}, nil},
		{"a long record spans tags", map[string]string{long + "1": "x", long + "2": "y", long + "3": "z"}, nil, map[string]string{}, []string{tagRecord + "-1", long + "1", long + "2", long + "3"}},
		{"a shorter record drops its continuation", map[string]string{long + "1": "x", long + "2": "y", long + "3": "z"}, nil, map[string]string{long + "1": "x"}, []string{tagRecord + "-1", long + "2", long + "3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			have := map[string]string{"Name": "g", TagInstanceGroup: "a/b"}
			if c.before != nil {
				for k, v := range withRecord(c.before) {
					have[k] = v
				}
			}
			for k, v := range c.outside {
				have[k] = v
			}
			now := map[string]string{"Name": "g", TagInstanceGroup: "a/b"}
			maps.Copy(now, c.now)
			want := withRecord(now)
			for k, v := range want {
				if len(v) > tagValueLimit {
					t.Fatalf("tag %s has a %d-character value", k, len(v))
				}
			}
			if got := removableTags(have, want); !reflect.DeepEqual(got, c.wantRemove) {
				t.Fatalf("removableTags = %v, want %v", got, c.wantRemove)
			}
		})
	}
}
