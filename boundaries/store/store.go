// Package store holds the boundaries currently in force: the last valid
// parse of the boundary ConfigMap. The ConfigMap controller writes it; the
// admission webhooks and the fan-out read it. It exists so that an invalid
// ConfigMap that got past admission never replaces good boundaries.
package store

import (
	"sync"

	"github.com/instancemgr/instance-manager/boundaries"
)

// State is what the store knows about the boundary ConfigMap.
type State struct {
	// Config is the last valid boundaries; nil when the ConfigMap does not
	// exist (no boundaries: effective spec = submitted spec).
	Config *boundaries.Config
	// ResourceVersion is the ConfigMap version Config was parsed from; ""
	// when the ConfigMap does not exist.
	ResourceVersion string
	// Loaded is false until the controller has read the ConfigMap once.
	// Admission denies InstanceGroup requests until then, rather than
	// admit them without boundaries.
	Loaded bool
	// Invalid is the parse error of the newest ConfigMap version when it
	// was rejected and Config is an older, valid one (or nil if none was
	// ever valid since start).
	Invalid error
}

// Store is safe for concurrent use. The zero value is an empty, not-loaded store.
type Store struct {
	mu    sync.RWMutex
	state State
	subs  []chan<- State
}

// Get returns the current state.
func (s *Store) Get() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state
}

// SetValid records a valid ConfigMap (cfg may be nil for "no ConfigMap")
// and notifies subscribers.
func (s *Store) SetValid(cfg *boundaries.Config, resourceVersion string) {
	s.set(State{Config: cfg, ResourceVersion: resourceVersion, Loaded: true})
}

// SetInvalid records that the newest ConfigMap version failed to parse; the
// last valid Config stays in force. Subscribers are not notified: nothing
// fans out from an invalid ConfigMap.
func (s *Store) SetInvalid(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Invalid = err
	s.state.Loaded = true
}

// Subscribe registers ch to receive the new state after every SetValid.
// Sends do not block: a subscriber that is not ready misses that update
// (it can always Get the latest).
func (s *Store) Subscribe(ch chan<- State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, ch)
}

func (s *Store) set(st State) {
	s.mu.Lock()
	s.state = st
	subs := append([]chan<- State(nil), s.subs...)
	s.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- st:
		default:
		}
	}
}
