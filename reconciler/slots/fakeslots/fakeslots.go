// Package fakeslots is a slots.Keeper in memory for unit tests of
// the reconciler: the same cap and per-namespace share as the production
// keeper, slots.Leases (both judge with slots.Full), without
// an API server.
package fakeslots

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// Slots is a slots.Keeper in memory (a test fake: a restart
// forgets it). It caps how many InstanceGroups rotate nodes at once as
// slots.Leases does. Safe for concurrent use.
type Slots struct {
	// Max returns the current cap; 0 or less means no cap.
	Max func() int
	// PerNamespace, if set, returns the cap on slots the groups of one
	// namespace hold at once (the boundary ConfigMap's quota
	// maxConcurrentUpgrades), so that one tenant cannot hold every slot;
	// 0 or less means no cap.
	PerNamespace func(namespace string) int
	// Now returns the current time (tests); default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	holders map[types.NamespacedName]*memorySlot
}

// memorySlot is a held slot: the holder's progress and when it changed.
type memorySlot struct {
	marker  string
	changed time.Time
}

var _ slots.Keeper = &Slots{}

// Acquire implements slots.Keeper; it never fails.
func (s *Slots) Acquire(_ context.Context, key types.NamespacedName, _ types.UID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[types.NamespacedName]*memorySlot{}
	}
	if _, ok := s.holders[key]; ok {
		return true, nil
	}
	held := make([]types.NamespacedName, 0, len(s.holders))
	for k := range s.holders {
		held = append(held, k)
	}
	if slots.Full(held, key.Namespace, s.Max, s.PerNamespace) {
		return false, nil
	}
	s.holders[key] = &memorySlot{changed: s.now()}
	return true, nil
}

// Release implements slots.Keeper; it never fails and counts nothing.
func (s *Slots) Release(_ context.Context, key types.NamespacedName, _ slots.Reason) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holders, key)
	return nil
}

// Holders implements slots.Keeper.
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

// Progress implements slots.Keeper; it never fails.
func (s *Slots) Progress(_ context.Context, key types.NamespacedName, marker string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holders[key]
	if h == nil {
		return s.now(), nil
	}
	if h.marker != marker {
		h.marker, h.changed = marker, s.now()
	}
	return h.changed, nil
}

// LastProgress implements slots.Keeper; it never fails.
func (s *Slots) LastProgress(_ context.Context, key types.NamespacedName) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.holders[key]; h != nil {
		return h.changed, true, nil
	}
	return time.Time{}, false, nil
}

func (s *Slots) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
