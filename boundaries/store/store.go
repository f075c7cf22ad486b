// Package store holds the boundaries currently in force: the last valid
// parse of the boundary ConfigMap, and the rollout record (the revisions
// groups may still run, and where the rollout of the newest one is). The
// ConfigMap controller writes it; the admission webhooks and the fan-out
// read it. It exists so that an invalid ConfigMap that got past admission
// never replaces good boundaries, and so that every replica admits a group
// against the boundaries revision it runs (assign.go).
package store

import (
	"sync"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
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
	// Revision names Config (boundaries.Revision of Data); "" without a
	// ConfigMap.
	Revision string
	// Data is the ConfigMap data Config was parsed from (nil when set by
	// SetValid).
	Data map[string]string
	// Record is the rollout record; nil until the controller wrote one.
	Record *record.Record
	// Revisions are the revisions the record keeps (the stable one, the
	// target, and those groups still run), parsed; revisions that no
	// longer parse are left out.
	Revisions map[string]*boundaries.Config
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
// and notifies subscribers. Its revision is derived from cfg's hash; the
// controller calls SetData, which names it from the data.
func (s *Store) SetValid(cfg *boundaries.Config, resourceVersion string) {
	rev := ""
	if cfg != nil {
		rev = cfg.Hash(false)[:10]
	}
	s.SetData(cfg, resourceVersion, nil, rev)
}

// SetData records a valid ConfigMap with its data and revision (cfg nil,
// data nil and revision "" for "no ConfigMap") and notifies subscribers.
// The rollout record stays.
func (s *Store) SetData(cfg *boundaries.Config, resourceVersion string, data map[string]string, revision string) {
	s.update(func(st *State) {
		*st = State{Config: cfg, ResourceVersion: resourceVersion, Loaded: true, Data: data, Revision: revision,
			Record: st.Record, Revisions: st.Revisions}
	})
}

// SetRecord records the rollout record and the revisions it keeps, and
// notifies subscribers.
func (s *Store) SetRecord(rec *record.Record, revisions map[string]*boundaries.Config) {
	s.update(func(st *State) { st.Record, st.Revisions = rec, revisions })
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

// Subscribe registers ch to receive the new state after every SetValid,
// SetData and SetRecord.
// Sends do not block: a subscriber that is not ready misses that update
// (it can always Get the latest).
func (s *Store) Subscribe(ch chan<- State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, ch)
}

// update changes the state under the lock and notifies subscribers.
func (s *Store) update(change func(*State)) {
	s.mu.Lock()
	change(&s.state)
	st := s.state
	subs := append([]chan<- State(nil), s.subs...)
	s.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- st:
		default:
		}
	}
}
