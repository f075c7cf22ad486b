// Package record is the durable state of progressive boundary rollouts:
// which boundaries revision is being rolled out (the target), which is the
// last good one (stable), the waves with their groups, and the boundary
// ConfigMap data of every revision a group may still be admitted against.
// It lives in a ConfigMap the controller owns (RecordName, beside the
// boundary ConfigMap), so that every replica's webhooks can merge a group
// against the revision it runs, and a restarted controller carries on.
//
// The package is pure: encoding to and from the ConfigMap's data. The
// rollout controller (reconciler/rollout) writes it; the store
// (boundaries/store) loads it for the webhooks and the fan-out.
package record

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Phases of a rollout.
const (
	// PhaseProgressing: waves are being started, moved, judged and soaked.
	PhaseProgressing = "Progressing"
	// PhaseHalted: a wave failed; no group moves until the admin resumes
	// or rolls back.
	PhaseHalted = "Halted"
	// PhaseRolledBack: the failed groups were moved back to the stable
	// revision; nothing else moves until the admin resumes or changes the
	// ConfigMap.
	PhaseRolledBack = "RolledBack"
	// PhaseComplete: every group may run the target, which is the stable
	// revision now.
	PhaseComplete = "Complete"
)

// Failure criteria (Group.Criterion).
const (
	CriterionGroupError     = "group_error"
	CriterionStartupTimeout = "startup_timeout"
	CriterionUnhealthyNodes = "unhealthy_nodes"
	CriterionRejected       = "rejected"
	// CriterionPodsNotReady: a pod of a Deployment or StatefulSet on one
	// of the group's new nodes was not Ready for longer than
	// failure.podNotReadyAfter.
	CriterionPodsNotReady = "pods_not_ready"
	// CriterionContainerRestarts: a container of such a pod restarted
	// more than failure.maxContainerRestarts times.
	CriterionContainerRestarts = "container_restarts"
)

// States of a group in a wave.
const (
	// GroupMoving: its wave started; its re-admission to the target has
	// not been seen yet.
	GroupMoving = "Moving"
	// GroupRotating: it runs the target and is replacing its nodes or
	// waiting for them to become Ready.
	GroupRotating = "Rotating"
	// GroupHealthy: it runs the target, is Ready with every node updated
	// and Ready.
	GroupHealthy = "Healthy"
	// GroupFailed: it met a failure criterion (Reason says which).
	GroupFailed = "Failed"
	// GroupUnjudged: it was not Ready when its wave started, so it is
	// moved but its health says nothing about the revision.
	GroupUnjudged = "Unjudged"
)

// Data keys of the record ConfigMap.
const (
	// KeyStatus holds the Record as YAML.
	KeyStatus = "status"
	// KeyRevisionPrefix + revision holds that revision's boundary
	// ConfigMap data as JSON, or, when large, gzip-compressed JSON in
	// base64 after the prefix "gzip:".
	KeyRevisionPrefix = "revision."
	// KeyStatusCompressed, when present, holds the whole Record as
	// gzip-compressed JSON in base64 after the prefix "gzip:" (a record
	// of thousands of groups); KeyStatus then holds a readable summary
	// without the waves' groups, which Decode ignores.
	KeyStatusCompressed = "status.gz"
)

// AnnotationAction, on the record ConfigMap, is how the admin answers a
// halted rollout ("resume" or "rollback") or lets a wave with manual
// approval start ("approve"). The controller acts on it once and removes
// it.
const AnnotationAction = "instancemgr.keikoproj.io/rollout-action"

// Actions, the values of AnnotationAction.
const (
	ActionResume   = "resume"
	ActionRollback = "rollback"
	// ActionApprove approves the first wave not started yet whose policy
	// says approval: manual and that is not approved yet.
	ActionApprove = "approve"
)

// Record is the state of the latest boundaries rollout.
type Record struct {
	// Target is the revision being rolled out: the boundary ConfigMap's
	// current one once the controller has seen it.
	Target string `json:"target"`
	// Stable is the last good revision: the target of the last rollout
	// that completed. Groups whose wave has not started run it (or the
	// revision they ran before), and rollback returns groups to it.
	Stable string `json:"stable"`
	// Phase is Progressing, Halted, RolledBack or Complete.
	Phase string `json:"phase"`
	// Message says in one line where the rollout is.
	Message string `json:"message,omitempty"`
	// StartedAt is when the controller started rolling out Target.
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the last wave completed.
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Wave is the index in Waves of the current wave; -1 before the first.
	Wave int `json:"wave"`
	// Waves are every wave of the rollout; a wave's groups are chosen
	// when it starts.
	Waves []Wave `json:"waves,omitempty"`
	// WaitingFor says why the next wave has not started although the
	// current one completed: it waits for the admin's approval, or is
	// outside the maintenance windows, or in a change freeze
	// (boundaries.Maintenance), with when it may start.
	WaitingFor string `json:"waitingFor,omitempty"`
	// Halt says why the rollout halted, while it is Halted or RolledBack.
	Halt *Halt `json:"halt,omitempty"`
	// RolledBack are the groups (namespace/name) rollback moved back to
	// Stable; they wait for the admin to resume or for a new revision.
	RolledBack []string `json:"rolledBack,omitempty"`
	// GroupsDone, GroupsFailed and GroupsWaiting count the groups of the
	// rollout: healthy (or moved, unjudged) on the target, failed, and
	// not yet in a started wave or still moving.
	GroupsDone    int `json:"groupsDone"`
	GroupsFailed  int `json:"groupsFailed"`
	GroupsWaiting int `json:"groupsWaiting"`
	// LastAction is the admin's last action the controller carried out,
	// with when.
	LastAction string `json:"lastAction,omitempty"`
	// Changes is what the rollout changes: the field-by-field difference
	// of the defaults between Stable and Target when it started
	// (boundaries.DefaultsDiff), at most MaxChanges of them, values cut
	// to MaxChangeValue bytes; ChangesCount is how many there are in all.
	// A group's own value on a shared path may keep it from a change.
	// ChangesUnknown says why there are none when a revision's boundaries
	// were not known.
	Changes        []Change `json:"changes,omitempty"`
	ChangesCount   int      `json:"changesCount,omitempty"`
	ChangesUnknown string   `json:"changesUnknown,omitempty"`
	// Early, Late and Deferred are the groups whose tenant chose their
	// time (tenants.go): moved ahead of their wave, moved after it, and
	// kept out of it for now. Early and late groups are judged alone.
	Early    []Group    `json:"early,omitempty"`
	Late     []Group    `json:"late,omitempty"`
	Deferred []Deferral `json:"deferred,omitempty"`
}

// Change is one default that changes: boundaries.FieldChange.
type Change struct {
	// Path is the field's dot path ("spec.eks.configuration.image").
	Path string `json:"path"`
	// Old and New are the values; "" when the default is added or
	// removed.
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

// Bounds of the plan in the record, which has a size budget
// (MaxDataBytes).
const (
	// MaxPlanned is how many group names a wave's plan keeps.
	MaxPlanned = 50
	// MaxChanges is how many field changes the record keeps.
	MaxChanges = 30
	// MaxChangeValue bounds each change's old and new value, in bytes.
	MaxChangeValue = 200
)

// Wave is one wave of the rollout.
type Wave struct {
	Name string `json:"name"`
	// Selects says which groups the wave takes, as the policy wrote it.
	Selects string `json:"selects"`
	// Soak is how long the wave's groups stay healthy before the next
	// wave starts.
	Soak metav1.Duration `json:"soak"`
	// Approval is "manual" when the wave waits for the admin's approval
	// (ActionApprove) before it starts; ApprovedAt is when it came.
	Approval   string       `json:"approval,omitempty"`
	ApprovedAt *metav1.Time `json:"approvedAt,omitempty"`
	// StartedAt: its groups were chosen and moved.
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// HealthyAt: every judged group was healthy (the soak started); reset
	// when one stops being healthy.
	HealthyAt *metav1.Time `json:"healthyAt,omitempty"`
	// CompletedAt: the soak ended with every judged group healthy.
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// NodesUpdated of NodesTotal are the wave's instances on the target's
	// launch template version; NodesPerHour is the pace since the wave
	// started and EstimatedEnd when, at that pace, its last node is
	// replaced and its soak ends. Updated when the counts change.
	NodesUpdated int          `json:"nodesUpdated,omitempty"`
	NodesTotal   int          `json:"nodesTotal,omitempty"`
	NodesPerHour int          `json:"nodesPerHour,omitempty"`
	EstimatedEnd *metav1.Time `json:"estimatedEnd,omitempty"`
	// The plan of a wave not started yet, with the same selection the
	// wave makes when it starts, from the groups there are now (kept up
	// to date until it starts, then left as it was): Planned names its
	// first MaxPlanned groups (namespace/name, sorted), PlannedCount
	// counts them all, PlannedNodes is their status.nodesTotal, and
	// Estimate says how long the wave should take: PlannedNodes at the
	// pace (NodesPerHour) of the last completed wave plus the soak, or why
	// that is not known yet.
	Planned      []string `json:"planned,omitempty"`
	PlannedCount int      `json:"plannedCount,omitempty"`
	PlannedNodes int      `json:"plannedNodes,omitempty"`
	Estimate     string   `json:"estimate,omitempty"`
	Groups       []Group  `json:"groups,omitempty"`
}

// Group is one group of a wave.
type Group struct {
	// Group is namespace/name.
	Group string `json:"group"`
	// State is Moving, Rotating, Healthy, Failed or Unjudged.
	State string `json:"state"`
	// Reason says why a group failed; Criterion names the failure
	// criterion it met: group_error, startup_timeout, unhealthy_nodes,
	// rejected (its re-admission was refused), pods_not_ready or
	// container_restarts (its pods: Halt.Pods).
	Reason    string `json:"reason,omitempty"`
	Criterion string `json:"criterion,omitempty"`
	// MovedAt is when the group was first seen running the target.
	MovedAt *metav1.Time `json:"movedAt,omitempty"`
	// Since starts the startup timeout: the move, or the group's last
	// progress (more instances updated, a new spec, an upgrade slot).
	Since *metav1.Time `json:"since,omitempty"`
	// Updated and Generation are the group's nodesUpdated and
	// metadata.generation last seen, to tell progress.
	Updated    int   `json:"updated,omitempty"`
	Generation int64 `json:"generation,omitempty"`
}

// Halt is why the rollout halted.
type Halt struct {
	At metav1.Time `json:"at"`
	// Wave is the name of the wave that failed.
	Wave   string `json:"wave"`
	Reason string `json:"reason"`
	// Criterion is the first failed group's (Group.Criterion).
	Criterion string `json:"criterion"`
	// Groups are the groups that failed (namespace/name).
	Groups []string `json:"groups"`
	// Pods are the first MaxHaltPods pods that failed a workload
	// criterion (pods_not_ready, container_restarts), in the order of
	// Groups; PodsCount counts them all; Nodes are the nodes those first
	// pods run on, each once.
	Pods      []FailedPod `json:"pods,omitempty"`
	PodsCount int         `json:"podsCount,omitempty"`
	Nodes     []string    `json:"nodes,omitempty"`
}

// MaxHaltPods is how many failed pods a Halt names.
const MaxHaltPods = 10

// FailedPod is a pod that failed a workload criterion.
type FailedPod struct {
	// Pod is namespace/name; Node the node it runs on; Group the
	// InstanceGroup (namespace/name) of that node.
	Pod   string `json:"pod"`
	Node  string `json:"node"`
	Group string `json:"group"`
	// Why says what failed, e.g. "not Ready for 3m10s (podNotReadyAfter
	// 3m0s)" or "container app restarted 7 times (maxContainerRestarts 5)".
	Why string `json:"why"`
}

// WaveOf returns the index of the started wave that holds group, or -1.
func (r *Record) WaveOf(group string) int {
	if r == nil {
		return -1
	}
	for i := 0; i <= r.Wave && i < len(r.Waves); i++ {
		for _, g := range r.Waves[i].Groups {
			if g.Group == group {
				return i
			}
		}
	}
	return -1
}

// LastWaveStarted reports whether the last wave (which takes every group
// left) has started: from then on every group goes to the target.
func (r *Record) LastWaveStarted() bool {
	return r != nil && len(r.Waves) > 0 && r.Wave == len(r.Waves)-1 && r.Waves[r.Wave].StartedAt != nil
}

// IsRolledBack reports whether rollback moved group back to Stable.
func (r *Record) IsRolledBack(group string) bool {
	return r != nil && slices.Contains(r.RolledBack, group)
}

// Encode returns the record ConfigMap's data: the record under KeyStatus
// and each revision's boundary ConfigMap data under KeyRevisionPrefix+id,
// kept within MaxDataBytes (see compact): a large record's groups go
// compressed under KeyStatusCompressed with a readable summary under
// KeyStatus, and a large revision is stored compressed. Revisions are
// stored once each (a revision is the hash of its data). A record that
// still does not fit is a *TooLargeError: the caller reports it rather
// than have the API server refuse the write.
func Encode(r *Record, revisions map[string]map[string]string) (map[string]string, error) {
	status, err := yaml.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding the rollout record: %w", err)
	}
	out := map[string]string{KeyStatus: string(status)}
	for _, id := range slices.Sorted(maps.Keys(revisions)) {
		raw, err := json.Marshal(revisions[id])
		if err != nil {
			return nil, fmt.Errorf("encoding revision %s: %w", id, err)
		}
		out[KeyRevisionPrefix+id] = string(raw)
		if len(raw) > compressAbove {
			if out[KeyRevisionPrefix+id], err = compress(raw); err != nil {
				return nil, fmt.Errorf("encoding revision %s: %w", id, err)
			}
		}
	}
	if size(out) > MaxDataBytes || len(status) > compressAbove*16 {
		if err := compact(r, out); err != nil {
			return nil, err
		}
	}
	if n := size(out); n > MaxDataBytes {
		return nil, &TooLargeError{Bytes: n, Groups: r.groupCount(), Revisions: len(revisions)}
	}
	return out, nil
}

// Decode reads the record ConfigMap's data, in this format or the one
// before it (a plain YAML status, plain JSON revisions: what an earlier
// controller version wrote). A missing status gives a nil Record;
// revisions that do not decode are reported in the error but the others
// are returned.
func Decode(data map[string]string) (*Record, map[string]map[string]string, error) {
	var problems []string
	var rec *Record
	if s, ok := data[KeyStatusCompressed]; ok {
		rec = &Record{}
		raw, err := decompress(s)
		if err == nil {
			err = json.Unmarshal(raw, rec)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("data.%s: %v", KeyStatusCompressed, err))
			rec = nil
		}
	} else if s, ok := data[KeyStatus]; ok && strings.TrimSpace(s) != "" {
		rec = &Record{}
		if err := yaml.Unmarshal([]byte(s), rec); err != nil {
			problems = append(problems, fmt.Sprintf("data.%s: %v", KeyStatus, err))
			rec = nil
		}
	}
	revisions := map[string]map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		id, ok := strings.CutPrefix(k, KeyRevisionPrefix)
		if !ok {
			continue
		}
		raw := []byte(data[k])
		if compressed(data[k]) {
			var err error
			if raw, err = decompress(data[k]); err != nil {
				problems = append(problems, fmt.Sprintf("data.%s: %v", k, err))
				continue
			}
		}
		var d map[string]string
		if err := json.Unmarshal(raw, &d); err != nil {
			problems = append(problems, fmt.Sprintf("data.%s: %v", k, err))
			continue
		}
		revisions[id] = d
	}
	if len(problems) > 0 {
		return rec, revisions, fmt.Errorf("rollout record: %s", strings.Join(problems, "; "))
	}
	return rec, revisions, nil
}
