package tagrecord

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

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
		{"a long record spans tags", map[string]string{long + "1": "x", long + "2": "y", long + "3": "z"}, nil, map[string]string{}, []string{Key + "-1", long + "1", long + "2", long + "3"}},
		{"a shorter record drops its continuation", map[string]string{long + "1": "x", long + "2": "y", long + "3": "z"}, nil, map[string]string{long + "1": "x"}, []string{Key + "-1", long + "2", long + "3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			have := map[string]string{"Name": "g", ownership.TagInstanceGroup: "a/b"}
			if c.before != nil {
				for k, v := range With(c.before) {
					have[k] = v
				}
			}
			for k, v := range c.outside {
				have[k] = v
			}
			now := map[string]string{"Name": "g", ownership.TagInstanceGroup: "a/b"}
			maps.Copy(now, c.now)
			want := With(now)
			for k, v := range want {
				if len(v) > valueLimit {
					t.Fatalf("tag %s has a %d-character value", k, len(v))
				}
			}
			if got := Removable(have, want); !reflect.DeepEqual(got, c.wantRemove) {
				t.Fatalf("Removable = %v, want %v", got, c.wantRemove)
			}
		})
	}
}
