// Package rollout is the progressive rollout of boundary changes: it moves
// the boundary ConfigMap's newest revision through the policy's waves
// (boundaries.RolloutPolicy), judges each wave's groups against the
// failure criteria, soaks, halts when a wave fails, and carries out the
// admin's resume and rollback. Its decisions go into the rollout record
// (boundaries/record); the fan-out (fanout.Reconciler) moves
// each group to the revision the record assigns it.
//
// step.go is the decision, a pure function of the record, the policy and
// what the groups report; controller.go reads and writes the cluster.
package rollout

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// Group is what the rollout needs to know about one InstanceGroup.
type Group struct {
	// Key is namespace/name.
	Key       string
	Namespace string
	Labels    map[string]string
	// Excluded groups (the ConfigMap's excludedNamespaces) get every
	// revision at once: boundaries do not apply to them.
	Excluded bool
	Deleting bool
	// Running is the revision its boundaries-hash belongs to ("" when no
	// revision the store knows gives it).
	Running string
	// AtTarget: its boundaries-hash is the target revision's.
	AtTarget bool
	// Rejected is the message of a refused re-admission (BoundariesApplied
	// reason Rejected) while the group is not at the target.
	Rejected string

	Generation, ObservedGeneration int64
	// State is status.currentState; Ready the Ready condition; Message
	// the Ready condition's message.
	State   string
	Ready   bool
	Message string
	// NodesUpdated and NodesTotal are status.nodesUpdated and nodesTotal.
	NodesUpdated, NodesTotal int
	// InService and ReadyNodes are status.nodesInService and nodesReady:
	// its InService instances and those of them with a Ready node.
	InService, ReadyNodes int
	// NodesReady is the NodesReady condition (every InService instance
	// has a Ready node); NodesUnhealthy is the NodesHealthy condition
	// False (node health found an instance without a Ready node past its
	// startup timeout, or NotReady past its unhealthy timeout).
	NodesReady, NodesUnhealthy bool
	// Nodes and NotReadyNodes count the group's Node objects (by the
	// instancegroup labels) and those whose Ready condition is not True.
	Nodes, NotReadyNodes int
	// Tenant is its tenant's choice, the annotation
	// v1alpha1.AnnotationRollout ("" when absent): tenants.go.
	Tenant string
	// Pods are the pods on its new nodes that the workload criteria may
	// fail (not Ready, or restarted): read only for the groups of the
	// wave being judged when the policy has such criteria
	// (workload_read.go); nil otherwise. PodsReadAt is when they were
	// read (zero: not read for this wave).
	Pods       []Pod
	PodsReadAt time.Time
}

// healthy: Ready for its current spec with every instance updated and
// every InService instance a Ready node (the NodesReady condition). A
// group with no instance (minSize 0, scaled in) is judged on what it
// runs: nothing, so nothing is unhealthy. Ready alone is not enough: it
// is "Ready nodes >= minSize", true with minSize 0 whatever the new
// instances do, and nodesUpdated counts instances whether or not they
// became nodes.
func (g Group) healthy() bool {
	return g.ObservedGeneration == g.Generation && g.State == v1alpha1.StateReady && g.Ready && g.NodesUpdated >= g.NodesTotal &&
		(g.NodesReady || g.NodesTotal == 0 && g.InService == 0)
}

// unhealthy is how many of the group's instances are unhealthy, of how
// many: Nodes not Ready (the live count), or InService instances without
// a Ready node (its status), whichever is more; of its Nodes or InService
// instances, whichever is more (a Node of an instance being terminated is
// counted, an instance that never registered a Node too).
func (g Group) unhealthy() (bad, of int) {
	return max(g.NotReadyNodes, g.InService-g.ReadyNodes), max(g.Nodes, g.InService)
}

// Input is what one step decides from.
type Input struct {
	Now time.Time
	// Revision is the boundary ConfigMap's current revision.
	Revision string
	// Policy is its rollout policy; nil for none.
	Policy *boundaries.RolloutPolicy
	// Maintenance is when a wave may start; nil: at any time.
	Maintenance *boundaries.Maintenance
	// Groups are every InstanceGroup.
	Groups []Group
	// Action is the admin's action on the record ("" for none).
	Action string
	// Configs are the parsed boundaries of the revisions the controller
	// knows, by revision: the current one and those the record keeps. A
	// rollout's start compares the stable revision's defaults with the
	// target's (Record.Changes).
	Configs map[string]*boundaries.Config
}

// Note is an Event to send: on the group Group (namespace/name), or on
// the boundary ConfigMap when Group is "".
type Note struct {
	Warning bool
	Reason  string
	Message string
	Group   string
}

// Event reasons of the rollout.
const (
	ReasonStarted     = "RolloutStarted"
	ReasonWaveStarted = "RolloutWaveStarted"
	ReasonWaveSoaking = "RolloutWaveSoaking"
	// ReasonWaveWaiting: the next wave waits for a maintenance window or
	// the end of a change freeze.
	ReasonWaveWaiting = "RolloutWaveWaitingForWindow"
	// ReasonWaveAwaitingApproval: the next wave waits for the admin's
	// approval (approval: manual); ReasonWaveApproved: it came.
	ReasonWaveAwaitingApproval = "RolloutWaveAwaitingApproval"
	ReasonWaveApproved         = "RolloutWaveApproved"
	ReasonWaveCompleted        = "RolloutWaveCompleted"
	ReasonComplete             = "RolloutComplete"
	ReasonHalted               = "RolloutHalted"
	ReasonGroupFailed          = "RolloutGroupFailed"
	ReasonResumed              = "RolloutResumed"
	ReasonRolledBack           = "RolloutRolledBack"
	ReasonActionIgnored        = "RolloutActionIgnored"
	// ReasonRecordNotWritten (Warning) and ReasonRecordWritten: the
	// rollout record could not be written (the rollout cannot move), and
	// is written again (Reconciler.reportWrite).
	ReasonRecordNotWritten = "RolloutRecordNotWritten"
	ReasonRecordWritten    = "RolloutRecordWritten"
)

// Result is a step's outcome.
type Result struct {
	Record *record.Record
	Notes  []Note
	// After is when the step should run again at the latest (a soak or a
	// startup timeout ends); 0 when only a change can move the rollout.
	After time.Duration
	// Acted: Input.Action was consumed (carried out or refused).
	Acted bool
}

// Step decides the rollout's next state from prev (nil: none yet).
//   - Without a policy the current revision is stable at once: every group
//     gets it (today's fan-out).
//   - The first record makes the current revision the stable one.
//   - A new revision starts a rollout from the stable revision; waves
//     start in order, each taking its groups when it starts; a wave
//     completes when its judged groups are healthy and have soaked; the
//     last wave completing makes the target stable.
//   - A judged group failing a criterion halts the rollout.
//   - "resume" re-judges the failed (or rolled back) groups with fresh
//     clocks; "rollback" sends the failed groups back to the stable one.
func Step(prev *record.Record, in Input) Result {
	s := &stepper{in: in, rec: clone(prev), now: metav1.NewTime(in.Now)}
	s.run()
	s.plan()
	s.count()
	return Result{Record: s.rec, Notes: s.notes, After: s.after, Acted: s.acted}
}

type stepper struct {
	in    Input
	rec   *record.Record
	now   metav1.Time
	notes []Note
	after time.Duration
	acted bool
	// podFailures are the failed pods of the groups that failed a
	// workload criterion in this step, by group key, for the halt.
	podFailures map[string][]PodFailure
}

func (s *stepper) note(warning bool, group, reason, format string, args ...any) {
	s.notes = append(s.notes, Note{Warning: warning, Group: group, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (s *stepper) wake(at time.Time) {
	d := at.Sub(s.in.Now)
	if d < time.Second {
		d = time.Second
	}
	if s.after == 0 || d < s.after {
		s.after = d
	}
}

func (s *stepper) run() {
	in := s.in
	if in.Policy == nil || s.rec == nil {
		if s.rec == nil || s.rec.Target != in.Revision || s.rec.Stable != in.Revision || s.rec.Phase != record.PhaseComplete {
			msg := "no rollout policy: every group gets revision " + in.Revision + " at once"
			if in.Policy != nil {
				msg = "revision " + in.Revision + " is the first recorded; it is the last good one"
			}
			s.rec = &record.Record{Target: in.Revision, Stable: in.Revision, Phase: record.PhaseComplete, Wave: -1, Message: msg, CompletedAt: &s.now}
		}
		if in.Action != "" {
			s.ignore("there is no rollout in progress")
		}
		return
	}
	if s.rec.Target != in.Revision {
		s.start()
	}
	s.action()
	if s.rec.Phase == record.PhaseProgressing {
		s.advance()
	}
	if s.rec.Phase == record.PhaseProgressing {
		s.tenants()
		if last := len(s.rec.Waves) - 1; s.rec.Wave == last && s.rec.Waves[last].CompletedAt != nil {
			s.advance() // the tenants' groups may have settled: the rollout may complete
		}
	}
}

// start begins rolling out the current revision from the stable one.
func (s *stepper) start() {
	stable := s.rec.Stable
	rec := &record.Record{Target: s.in.Revision, Stable: stable, Phase: record.PhaseProgressing, Wave: -1, StartedAt: &s.now}
	var names []string
	for _, w := range s.in.Policy.Waves {
		rec.Waves = append(rec.Waves, record.Wave{Name: w.Name, Selects: w.Describe(), Soak: metav1.Duration{Duration: w.Soak}, Approval: w.Approval})
		approval := ""
		if w.Approval == boundaries.ApprovalManual {
			approval = ", approved by the admin"
		}
		names = append(names, fmt.Sprintf("%s (%s, soak %s%s)", w.Name, w.Describe(), w.Soak, approval))
	}
	if prev := s.rec; prev.Phase != record.PhaseComplete {
		// The rollout it replaces did not complete: its groups stay on
		// what they run until their wave of this one.
		s.note(false, "", ReasonStarted, "Revision %s replaces revision %s, whose rollout was %s; groups keep what they run until their wave", s.in.Revision, prev.Target, prev.Phase)
	}
	s.rec = rec
	s.changes()
	s.note(false, "", ReasonStarted, "Rolling out boundaries revision %s (last good %s) in %d wave(s): %s; %s",
		s.in.Revision, stable, len(rec.Waves), strings.Join(names, "; "), changesText(rec))
}

func (s *stepper) ignore(why string) {
	s.acted = true
	s.note(true, "", ReasonActionIgnored, "Action %q on the rollout record was not carried out: %s (actions: %s while Halted or RolledBack, %s while Halted, %s while Progressing with a wave of approval: manual not started yet)",
		s.in.Action, why, record.ActionResume, record.ActionRollback, record.ActionApprove)
}

// action carries out the admin's resume or rollback.
func (s *stepper) action() {
	rec := s.rec
	switch s.in.Action {
	case "":
		return
	case record.ActionResume:
		if rec.Phase != record.PhaseHalted && rec.Phase != record.PhaseRolledBack {
			s.ignore("the rollout is " + rec.Phase)
			return
		}
		w := &rec.Waves[rec.Wave]
		var again []string
		for i := range w.Groups {
			if g := &w.Groups[i]; g.State == record.GroupFailed {
				g.State, g.Reason, g.Criterion, g.Since, g.MovedAt = record.GroupMoving, "", "", &s.now, nil
				again = append(again, g.Group)
			}
		}
		rec.Phase, rec.Halt, rec.RolledBack = record.PhaseProgressing, nil, nil
		w.HealthyAt = nil
		rec.LastAction = fmt.Sprintf("%s at %s", record.ActionResume, s.now.UTC().Format(time.RFC3339))
		s.acted = true
		s.note(false, "", ReasonResumed, "Rollout of revision %s resumed in wave %s; re-judged: %s", rec.Target, w.Name, listOrNone(again))
	case record.ActionRollback:
		if rec.Phase != record.PhaseHalted {
			s.ignore("the rollout is " + rec.Phase)
			return
		}
		rec.Phase = record.PhaseRolledBack
		rec.RolledBack = append([]string(nil), rec.Halt.Groups...)
		rec.LastAction = fmt.Sprintf("%s at %s", record.ActionRollback, s.now.UTC().Format(time.RFC3339))
		s.acted = true
		s.note(false, "", ReasonRolledBack, "Rollout of revision %s rolled back: %s move back to the last good revision %s with their own upgrade strategy; the other groups stay as they are",
			rec.Target, strings.Join(rec.RolledBack, ", "), rec.Stable)
	case record.ActionApprove:
		s.approve()
	default:
		s.ignore("unknown action")
	}
}

// approve approves the first wave not started yet that waits for the
// admin's approval (approval: manual) and has none yet: the admin may
// approve while an earlier wave still runs or soaks.
func (s *stepper) approve() {
	rec := s.rec
	if rec.Phase != record.PhaseProgressing {
		s.ignore("the rollout is " + rec.Phase)
		return
	}
	for i := rec.Wave + 1; i < len(rec.Waves); i++ {
		if w := &rec.Waves[i]; w.Approval == boundaries.ApprovalManual && w.ApprovedAt == nil {
			w.ApprovedAt = &s.now
			rec.LastAction = fmt.Sprintf("%s of wave %s at %s", record.ActionApprove, w.Name, s.now.UTC().Format(time.RFC3339))
			s.acted = true
			s.note(false, "", ReasonWaveApproved, "Wave %s of revision %s approved; it starts when the waves before it completed, inside a maintenance window", w.Name, rec.Target)
			return
		}
	}
	s.ignore("no wave waits for approval")
}

// approved reports whether the next wave may start as far as approval
// goes. When it waits for the admin's approval the record says so
// (WaitingFor, one Event when that changes) and nothing wakes the step
// but the approval.
func (s *stepper) approved() bool {
	w := s.rec.Waves[s.rec.Wave+1] // advance calls it before the last wave only
	if w.Approval != boundaries.ApprovalManual || w.ApprovedAt != nil {
		return true
	}
	why := fmt.Sprintf("wave %s waits for the admin's approval: kubectl annotate configmap <rollout record> %s=%s", w.Name, record.AnnotationAction, record.ActionApprove)
	if s.rec.WaitingFor != why {
		s.rec.WaitingFor = why
		s.note(false, "", ReasonWaveAwaitingApproval, "Wave %s of revision %s waits for the admin's approval (%s=%s on the rollout record)", w.Name, s.rec.Target, record.AnnotationAction, record.ActionApprove)
	}
	return false
}

// advance starts waves and judges the current one until it must wait.
func (s *stepper) advance() {
	rec := s.rec
	for range len(rec.Waves) + 1 {
		if rec.Wave >= 0 && rec.Waves[rec.Wave].CompletedAt == nil {
			if !s.judge(&rec.Waves[rec.Wave]) {
				return
			}
		}
		if rec.Wave == len(rec.Waves)-1 {
			if !s.tenantsSettled() {
				return // a deferred group, or one moved at its tenant's time and not judged yet
			}
			rec.Phase, rec.Stable, rec.CompletedAt = record.PhaseComplete, rec.Target, &s.now
			if failed := failedAlone(rec); len(failed) > 0 {
				s.note(true, "", ReasonComplete, "Boundaries revision %s reached every group in %d wave(s) and is the last good revision now, but failed on %d group(s) that their tenants moved outside their wave, judged alone: %s",
					rec.Target, len(rec.Waves), len(failed), strings.Join(failed, ", "))
				return
			}
			s.note(false, "", ReasonComplete, "Boundaries revision %s reached every group in %d wave(s); it is the last good revision now", rec.Target, len(rec.Waves))
			return
		}
		if !s.approved() || !s.inWindow() {
			return
		}
		s.plan() // what the wave starting now was planned to take, kept beside what it takes
		rec.Wave++
		s.choose(rec.Wave)
	}
}

// inWindow reports whether the next wave may start now
// (Input.Maintenance). When not, the record says why and until when
// (WaitingFor, one Event when that changes) and the step runs again when
// the next window opens.
func (s *stepper) inWindow() bool {
	open, next, why := s.in.Maintenance.Open(s.in.Now)
	if open {
		s.rec.WaitingFor = ""
		return true
	}
	name := s.rec.Waves[s.rec.Wave+1].Name // advance calls it before the last wave only
	if s.rec.WaitingFor != why {
		s.rec.WaitingFor = why
		s.note(false, "", ReasonWaveWaiting, "Wave %s of revision %s waits: %s", name, s.rec.Target, why)
	}
	if !next.IsZero() {
		s.wake(next)
	}
	return false
}

// choose takes the groups of wave i from those no earlier wave took.
func (s *stepper) choose(i int) {
	rec := s.rec
	w := &rec.Waves[i]
	members := s.selectWave(i, s.taken(i))
	w.StartedAt = &s.now
	w.Groups = nil
	var keys []string
	for _, g := range s.deferOut(members, w) {
		w.Groups = append(w.Groups, s.member(g))
		keys = append(keys, g.Key)
	}
	s.note(false, "", ReasonWaveStarted, "Wave %d/%d %s started (%s): %d group(s) move to revision %s: %s",
		i+1, len(rec.Waves), w.Name, w.Selects, len(keys), rec.Target, listOrNone(keys))
}

// taken is the groups the started waves before wave i took, and those
// whose tenant chose their time (moved early or late, or deferred): no
// wave takes them.
func (s *stepper) taken(i int) map[string]bool {
	taken := map[string]bool{}
	for j := range i {
		for _, g := range s.rec.Waves[j].Groups {
			taken[g.Group] = true
		}
	}
	for _, l := range [][]record.Group{s.rec.Early, s.rec.Late} {
		for _, g := range l {
			taken[g.Group] = true
		}
	}
	for _, d := range s.rec.Deferred {
		taken[d.Group] = true
	}
	return taken
}

// selectWave is the groups wave i takes of those not taken: every one
// left for the last wave (or one that takes the rest), a stable spread of
// percent of them, or those its selector and namespaces match; sorted by
// key for a percent, else in Input.Groups' order. The wave's start (choose) and its plan (plan.go) both use it, so
// that the plan is what the wave will do.
func (s *stepper) selectWave(i int, taken map[string]bool) []Group {
	pw := s.in.Policy.Waves[min(i, len(s.in.Policy.Waves)-1)]
	var candidates []Group
	for _, g := range s.in.Groups {
		if !g.Excluded && !g.Deleting && !taken[g.Key] {
			candidates = append(candidates, g)
		}
	}
	var members []Group
	switch {
	case pw.TakesRest() || i == len(s.rec.Waves)-1:
		members = candidates
	case pw.Percent > 0:
		// A stable spread: the same groups come early in every rollout.
		// The hashes are computed once: the plan selects at every step.
		order := make([]uint32, len(candidates))
		for k, g := range candidates {
			order[k] = spread(g.Key)
		}
		sort.Stable(bySpread{candidates, order})
		n := (len(candidates)*pw.Percent + 99) / 100
		members = candidates[:n]
		sort.Slice(members, func(a, b int) bool { return members[a].Key < members[b].Key })
	default:
		for _, g := range candidates {
			if pw.Matches(g.Namespace, g.Labels) {
				members = append(members, g)
			}
		}
	}
	return members
}

// member is a group joining a wave; one that is not healthy now is moved
// but not judged.
func (s *stepper) member(g Group) record.Group {
	m := record.Group{Group: g.Key, State: record.GroupMoving}
	if !g.AtTarget && !g.healthy() {
		m.State = record.GroupUnjudged
	}
	return m
}

// bySpread sorts groups by their spread hash.
type bySpread struct {
	groups []Group
	hash   []uint32
}

func (b bySpread) Len() int           { return len(b.groups) }
func (b bySpread) Less(i, j int) bool { return b.hash[i] < b.hash[j] }
func (b bySpread) Swap(i, j int) {
	b.groups[i], b.groups[j] = b.groups[j], b.groups[i]
	b.hash[i], b.hash[j] = b.hash[j], b.hash[i]
}

func spread(key string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()
}

// judge updates the wave's groups and reports whether the wave completed.
// A failure halts the rollout.
func (s *stepper) judge(w *record.Wave) bool {
	rec, f := s.rec, s.in.Policy.Failure
	byKey := map[string]Group{}
	for _, g := range s.in.Groups {
		byKey[g.Key] = g
	}
	if rec.Wave == len(rec.Waves)-1 {
		// The last wave takes groups created since it started as well.
		in := s.taken(len(rec.Waves))
		for _, g := range s.in.Groups {
			if !in[g.Key] && !g.Excluded && !g.Deleting {
				w.Groups = append(w.Groups, s.member(g))
			}
		}
	}
	kept := w.Groups[:0]
	done := true
	for _, m := range w.Groups {
		g, ok := byKey[m.Group]
		if !ok || g.Deleting {
			continue // deleted: no longer part of the rollout
		}
		s.observe(&m, g, f)
		done = done && (m.State == record.GroupHealthy || m.State == record.GroupUnjudged && g.AtTarget)
		kept = append(kept, m)
	}
	w.Groups = kept
	s.pace(w, byKey)
	s.unhealthyShare(w, byKey, f)
	var failed, reasons []string
	criterion := ""
	for _, m := range w.Groups {
		if m.State == record.GroupFailed {
			if criterion == "" {
				criterion = m.Criterion
			}
			failed = append(failed, m.Group)
			reasons = append(reasons, m.Group+": "+m.Reason)
			done = false
		}
	}
	if len(failed) > 0 {
		s.halt(w, criterion, failed, reasons)
		return false
	}
	if !done {
		w.HealthyAt = nil
		return false
	}
	if len(w.Groups) == 0 {
		w.CompletedAt = &s.now
		return true
	}
	if w.HealthyAt == nil {
		w.HealthyAt = &s.now
		if w.Soak.Duration > 0 {
			s.note(false, "", ReasonWaveSoaking, "Wave %s: every group runs revision %s and is healthy; soaking for %s", w.Name, rec.Target, w.Soak.Duration)
		}
	}
	if end := w.HealthyAt.Add(w.Soak.Duration); s.in.Now.Before(end) {
		s.wake(end)
		return false
	} else if !s.podsSeenSince(w, byKey, end) {
		return false
	}
	w.CompletedAt = &s.now
	s.note(false, "", ReasonWaveCompleted, "Wave %s completed: %d group(s) run revision %s and stayed healthy for %s", w.Name, len(w.Groups), rec.Target, w.Soak.Duration)
	return true
}

// observe updates one group of the current wave against the criteria.
func (s *stepper) observe(m *record.Group, g Group, f boundaries.FailureCriteria) {
	if m.State == record.GroupFailed {
		return
	}
	if !g.AtTarget {
		if g.Rejected != "" {
			m.State, m.Criterion, m.Reason = record.GroupFailed, record.CriterionRejected, "its re-admission to the revision was refused: "+g.Rejected
		} else if m.State != record.GroupUnjudged {
			m.State = record.GroupMoving
		}
		return
	}
	if m.MovedAt == nil {
		m.MovedAt, m.Since, m.Updated, m.Generation = &s.now, &s.now, g.NodesUpdated, g.Generation
	}
	// Progress restarts the startup clock: more instances on the new
	// spec, a new spec (a tenant's edit), or waiting for an upgrade slot.
	// Fewer is no progress but the new count to grow from: the first
	// count may be the group's status for its old spec (every instance
	// updated), read before its reconcile saw the move.
	switch {
	case g.NodesUpdated > m.Updated || g.Generation != m.Generation || g.State == v1alpha1.StateInitUpgrade:
		m.Since, m.Updated, m.Generation = &s.now, g.NodesUpdated, g.Generation
	case g.NodesUpdated < m.Updated:
		m.Updated = g.NodesUpdated
	}
	if m.State == record.GroupUnjudged {
		return
	}
	// New nodes are those since its wave started; a group its tenant
	// moved outside the waves (tenants.go) is judged from its move.
	since := m.MovedAt.Time
	if w := s.rec.Wave; w >= 0 && w < len(s.rec.Waves) && s.rec.Waves[w].StartedAt != nil {
		since = s.rec.Waves[w].StartedAt.Time
	}
	pods, podsWaiting, podsDue := judgePods(g.Pods, f, since, m.MovedAt.Time)
	switch {
	case f.GroupError && g.State == v1alpha1.StateError && g.ObservedGeneration == g.Generation:
		m.State, m.Criterion, m.Reason = record.GroupFailed, record.CriterionGroupError, "in state Error: "+g.Message
	case len(pods) > 0:
		m.State, m.Criterion, m.Reason = record.GroupFailed, pods[0].Criterion, podsReason(pods)
		if s.podFailures == nil {
			s.podFailures = map[string][]PodFailure{}
		}
		s.podFailures[m.Group] = pods
	case g.healthy() && podsWaiting > 0:
		// Its nodes are healthy; its verdict waits for pods not Ready
		// yet (not for the startup timeout: podNotReadyAfter decides).
		m.State = record.GroupRotating
		s.wake(podsDue)
	case g.healthy():
		m.State, m.Reason, m.Criterion = record.GroupHealthy, "", ""
	case !s.in.Now.Before(m.Since.Add(f.StartupTimeout)):
		m.State, m.Criterion = record.GroupFailed, record.CriterionStartupTimeout
		m.Reason = fmt.Sprintf("not Ready with every instance updated and every in-service instance a Ready node within the startup timeout %s (state %s: %s; %d of %d in-service instance(s) with Ready nodes)",
			f.StartupTimeout, g.State, g.Message, g.ReadyNodes, g.InService)
	default:
		m.State = record.GroupRotating
		s.wake(m.Since.Add(f.StartupTimeout))
	}
}

// unhealthyShare fails the counted groups with unhealthy instances (Group.
// unhealthy: a Node not Ready, or an InService instance without a Ready
// node) when the wave's share of them is above the policy's. Counted are
// the healthy groups, and the groups on the target whose rotation is done
// but whose node health reports an instance without a Ready node past its
// startup timeout (NodesHealthy False): instances that never registered
// count, after the same grace node health gives them, so a group whose
// new instances never became nodes fails here rather than passing as
// Ready.
func (s *stepper) unhealthyShare(w *record.Wave, byKey map[string]Group, f boundaries.FailureCriteria) {
	counted := func(m record.Group, g Group) bool {
		return m.State == record.GroupHealthy ||
			m.State == record.GroupRotating && g.AtTarget && g.NodesUpdated >= g.NodesTotal && g.NodesUnhealthy
	}
	nodes, bad := 0, 0
	for _, m := range w.Groups {
		if g := byKey[m.Group]; counted(m, g) {
			b, of := g.unhealthy()
			nodes += of
			bad += b
		}
	}
	if nodes == 0 || bad*100 <= f.MaxUnhealthyPercent*nodes {
		return
	}
	for i := range w.Groups {
		m := &w.Groups[i]
		g := byKey[m.Group]
		if b, of := g.unhealthy(); counted(*m, g) && b > 0 {
			m.State, m.Criterion = record.GroupFailed, record.CriterionUnhealthyNodes
			m.Reason = fmt.Sprintf("%d of its %d instance(s) unhealthy (%d node(s) not Ready, %d of %d in-service instance(s) without a Ready node); the wave's judged groups have %d of %d unhealthy, above maxUnhealthyPercent %d%%",
				b, of, g.NotReadyNodes, g.InService-g.ReadyNodes, g.InService, bad, nodes, f.MaxUnhealthyPercent)
		}
	}
}

func (s *stepper) halt(w *record.Wave, criterion string, failed, reasons []string) {
	rec := s.rec
	rec.Phase = record.PhaseHalted
	rec.Halt = &record.Halt{At: s.now, Wave: w.Name, Reason: strings.Join(reasons, "; "), Criterion: criterion, Groups: failed}
	haltPods(rec.Halt, s.podFailures)
	w.HealthyAt = nil
	s.note(true, "", ReasonHalted, "Rollout of boundaries revision %s halted in wave %d/%d %s: %d group(s) failed: %s. No other group moves; groups of later waves keep what they run (last good %s). "+
		"Resume after fixing, or roll the failed groups back: kubectl annotate configmap <rollout record> %s=%s (or %s)",
		rec.Target, rec.Wave+1, len(rec.Waves), w.Name, len(failed), strings.Join(reasons, "; "), rec.Stable, record.AnnotationAction, record.ActionRollback, record.ActionResume)
	for i, g := range failed {
		s.note(true, g, ReasonGroupFailed, "Boundaries revision %s failed on this group in wave %s (%s); the rollout halted", rec.Target, w.Name, strings.TrimPrefix(reasons[i], g+": "))
	}
}

// count fills the record's counters and message.
func (s *stepper) count() {
	rec := s.rec
	rec.GroupsDone, rec.GroupsFailed, rec.GroupsWaiting = 0, 0, 0
	if rec.Phase == record.PhaseComplete {
		return
	}
	inWave := map[string]string{}
	for i, w := range rec.Waves {
		if i > rec.Wave {
			break
		}
		for _, g := range w.Groups {
			inWave[g.Group] = g.State
		}
	}
	for _, l := range [][]record.Group{rec.Early, rec.Late} {
		for _, g := range l {
			inWave[g.Group] = g.State
		}
	}
	total := 0
	for _, g := range s.in.Groups {
		if g.Excluded || g.Deleting {
			continue
		}
		total++
		switch st := inWave[g.Key]; {
		case st == record.GroupFailed:
			rec.GroupsFailed++
		case st == record.GroupHealthy, st == record.GroupUnjudged && g.AtTarget:
			rec.GroupsDone++
		}
	}
	rec.GroupsWaiting = total - rec.GroupsDone - rec.GroupsFailed
	wave := "no wave started"
	if rec.Wave >= 0 {
		wave = fmt.Sprintf("wave %d/%d %s", rec.Wave+1, len(rec.Waves), rec.Waves[rec.Wave].Name)
		if p := paceText(rec.Waves[rec.Wave]); p != "" {
			wave += " (" + p + ")"
		}
	}
	rec.Message = fmt.Sprintf("%s revision %s (last good %s), %s: %d group(s) done, %d failed, %d waiting",
		rec.Phase, rec.Target, rec.Stable, wave, rec.GroupsDone, rec.GroupsFailed, rec.GroupsWaiting)
	if len(rec.RolledBack) > 0 {
		rec.Message += "; rolled back: " + strings.Join(rec.RolledBack, ", ")
	}
	if next := rec.Wave + 1; next < len(rec.Waves) {
		w := rec.Waves[next]
		rec.Message += fmt.Sprintf("; next wave %d/%d %s: %d group(s), %d node(s) planned, %s", next+1, len(rec.Waves), w.Name, w.PlannedCount, w.PlannedNodes, w.Estimate)
	}
	if rec.WaitingFor != "" {
		rec.Message += "; the next wave waits: " + rec.WaitingFor
	}
	if t := tenantsText(rec); t != "" {
		rec.Message += "; " + t
	}
}

func listOrNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// clone deep-copies a record.
func clone(r *record.Record) *record.Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Waves = make([]record.Wave, len(r.Waves))
	for i, w := range r.Waves {
		w.Groups = slices.Clone(w.Groups)
		w.Planned = slices.Clone(w.Planned)
		c.Waves[i] = w
	}
	c.RolledBack = slices.Clone(r.RolledBack)
	c.Early, c.Late, c.Deferred = slices.Clone(r.Early), slices.Clone(r.Late), slices.Clone(r.Deferred)
	c.Changes = slices.Clone(r.Changes)
	if r.Halt != nil {
		h := *r.Halt
		h.Groups = slices.Clone(h.Groups)
		h.Pods, h.Nodes = slices.Clone(h.Pods), slices.Clone(h.Nodes)
		c.Halt = &h
	}
	return &c
}
