// Package upgrade holds the upgrade strategies that rotate drifted nodes
// (rollingUpdate, crd), the drain that rollingUpdate uses, and the
// cluster-wide cap on groups rotating at once.
package upgrade

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Slots caps how many InstanceGroups rotate nodes at once, cluster-wide
// (--max-concurrent-upgrades, or the boundary ConfigMap's
// rollout.maxConcurrentUpgrades). The count lives in memory: after a restart
// groups re-acquire slots as they are reconciled. Safe for concurrent use.
type Slots struct {
	// Max returns the current cap; 0 or less means no cap.
	Max func() int
	// PerNamespace, if set, returns the cap on slots the groups of one
	// namespace hold at once (the boundary ConfigMap's quota
	// maxConcurrentUpgrades), so that one tenant cannot hold every slot;
	// 0 or less means no cap.
	PerNamespace func(namespace string) int

	mu      sync.Mutex
	holders map[types.NamespacedName]struct{}
}

// Acquire returns true if key holds a slot (already, or now).
func (s *Slots) Acquire(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[types.NamespacedName]struct{}{}
	}
	if _, ok := s.holders[key]; ok {
		return true
	}
	if max := s.Max(); max > 0 && len(s.holders) >= max {
		return false
	}
	if s.PerNamespace != nil {
		if max := s.PerNamespace(key.Namespace); max > 0 {
			n := 0
			for k := range s.holders {
				if k.Namespace == key.Namespace {
					n++
				}
			}
			if n >= max {
				return false
			}
		}
	}
	s.holders[key] = struct{}{}
	return true
}

// Release frees key's slot, if it holds one.
func (s *Slots) Release(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holders, key)
}

// Holders returns the keys holding slots, sorted.
func (s *Slots) Holders() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(s.holders))
	for k := range s.holders {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
