package slots

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestSlotsFull(t *testing.T) {
	held := []types.NamespacedName{{Namespace: "a", Name: "x"}, {Namespace: "a", Name: "y"}, {Namespace: "b", Name: "z"}, {}}
	limit := func(n int) func() int { return func() int { return n } }
	quota := map[string]int{"a": 2, "b": 3}
	perNS := func(ns string) int { return quota[ns] }
	for _, c := range []struct {
		name      string
		max       func() int
		perNS     func(string) int
		namespace string
		want      bool
	}{
		{"no limits", nil, nil, "a", false},
		{"cap not reached", limit(5), nil, "a", false},
		{"cap reached (a Lease without a holder counts)", limit(4), nil, "c", true},
		{"cap 0 is no cap", limit(0), perNS, "c", false},
		{"namespace quota reached", limit(10), perNS, "a", true},
		{"namespace quota not reached", limit(10), perNS, "b", false},
		{"namespace without quota", limit(10), perNS, "c", false},
	} {
		if got := Full(held, c.namespace, c.max, c.perNS); got != c.want {
			t.Errorf("%s: Full(%q) = %v, want %v", c.name, c.namespace, got, c.want)
		}
	}
}
