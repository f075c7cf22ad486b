package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// The workload criteria (failure.podNotReadyAfter,
// failure.maxContainerRestarts) judge a moved group by the tenants' pods
// on its new nodes, not only by its nodes. This file is the pure
// judgement; workload_read.go reads the pods.

// Owner kinds of a judged pod (Pod.Owner): the workloads whose pods the
// criteria look at. A pod of a ReplicaSet that no Deployment controls, a
// DaemonSet, a Job or a bare pod is not judged.
const (
	OwnerDeployment  = "Deployment"
	OwnerStatefulSet = "StatefulSet"
)

// Pod is what the workload criteria need of one pod on a node of a
// moved group.
type Pod struct {
	// Key is namespace/name; Node the node it runs on, NodeCreated when
	// that Node was created (it joined).
	Key         string
	Node        string
	NodeCreated time.Time
	// Owner is the kind of the workload controlling it: OwnerDeployment
	// (through its ReplicaSet), OwnerStatefulSet, or another kind ("" for
	// none).
	Owner string
	// Ready is its Ready condition True; NotReadySince is when that
	// condition last became not True (its lastTransitionTime, or the
	// pod's creation when it has no Ready condition yet).
	Ready         bool
	NotReadySince time.Time
	// Container is its container (or init container) restarted the most,
	// Restarts how many times (status restartCount).
	Container string
	Restarts  int
	// ReadAt is when it was read. A not-Ready time is measured up to it,
	// not to the step's now, so that pods read a while ago can delay a
	// failure but never cause one (the pod may have become Ready since).
	ReadAt time.Time
}

// PodFailure is a pod that failed a workload criterion: Pod
// (namespace/name), its Node, the Criterion (record.CriterionPodsNotReady
// or record.CriterionContainerRestarts) and Why, for people.
type PodFailure struct {
	Pod, Node, Criterion, Why string
}

// judgePods judges a group's pods against the workload criteria of f.
// Judged are the pods of a Deployment or StatefulSet on nodes created at
// or after waveStart (the group's new nodes); a pod's not-Ready time
// counts from the later of NotReadySince and clock (the group's move, or
// the admin's resume: a fresh clock). It returns the pods that fail,
// sorted by key; waiting, the number of judged pods not Ready but not yet
// for longer than f.PodNotReadyAfter (the group's verdict waits for
// them); and due, the earliest time one of those would fail (zero when
// none).
func judgePods(pods []Pod, f boundaries.FailureCriteria, waveStart, clock time.Time) (failed []PodFailure, waiting int, due time.Time) {
	for _, p := range pods {
		if p.Owner != OwnerDeployment && p.Owner != OwnerStatefulSet || p.NodeCreated.Before(waveStart) {
			continue
		}
		var whys []string
		criterion := ""
		if f.LimitRestarts && p.Restarts > f.MaxContainerRestarts {
			criterion = record.CriterionContainerRestarts
			whys = append(whys, fmt.Sprintf("container %s restarted %d times (maxContainerRestarts %d)", p.Container, p.Restarts, f.MaxContainerRestarts))
		}
		if !p.Ready && f.PodNotReadyAfter > 0 {
			since := p.NotReadySince
			if clock.After(since) {
				since = clock
			}
			if d := p.ReadAt.Sub(since); d > f.PodNotReadyAfter {
				if criterion == "" {
					criterion = record.CriterionPodsNotReady
				}
				// Rounded up: "for 30s" past a limit of 30s would read as none.
				whys = append(whys, fmt.Sprintf("not Ready for %s (podNotReadyAfter %s)", (d+time.Second-1).Truncate(time.Second), f.PodNotReadyAfter))
			} else if criterion == "" {
				waiting++
				if at := since.Add(f.PodNotReadyAfter); due.IsZero() || at.Before(due) {
					due = at
				}
			}
		}
		if criterion != "" {
			failed = append(failed, PodFailure{Pod: p.Key, Node: p.Node, Criterion: criterion, Why: strings.Join(whys, ", ")})
		}
	}
	slices.SortFunc(failed, func(a, b PodFailure) int { return strings.Compare(a.Pod, b.Pod) })
	return failed, waiting, due
}

// podsSeenSince reports whether, when the policy judges pods, every
// healthy group of the wave had its pods read at or after end (its soak's
// end): a wave completes on what its pods were doing when the soak ended,
// not on a read from before the drain moved them to the new nodes. When
// not, the step looks again in a second (the reader reads them first).
func (s *stepper) podsSeenSince(w *record.Wave, byKey map[string]Group, end time.Time) bool {
	if !s.in.Policy.Failure.JudgesPods() {
		return true
	}
	for _, m := range w.Groups {
		if m.State == record.GroupHealthy && byKey[m.Group].PodsReadAt.Before(end) {
			s.wake(s.in.Now.Add(time.Second))
			return false
		}
	}
	return true
}

// maxReasonPods is how many failed pods a group's Reason names.
const maxReasonPods = 5

// podsReason is a group's Reason for failed pods: the first
// maxReasonPods with their nodes and why, and how many more.
func podsReason(failed []PodFailure) string {
	var parts []string
	for _, p := range failed[:min(len(failed), maxReasonPods)] {
		parts = append(parts, fmt.Sprintf("%s on node %s: %s", p.Pod, p.Node, p.Why))
	}
	more := ""
	if n := len(failed) - maxReasonPods; n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Sprintf("%d pod(s) of Deployments/StatefulSets on its new nodes failed: %s%s", len(failed), strings.Join(parts, "; "), more)
}

// haltPods fills the halt's pods from the failed groups' (in h.Groups'
// order): the first record.MaxHaltPods, their nodes once each, the count.
func haltPods(h *record.Halt, byGroup map[string][]PodFailure) {
	for _, g := range h.Groups {
		for _, p := range byGroup[g] {
			h.PodsCount++
			if len(h.Pods) == record.MaxHaltPods {
				continue
			}
			h.Pods = append(h.Pods, record.FailedPod{Pod: p.Pod, Node: p.Node, Group: g, Why: p.Why})
			if !slices.Contains(h.Nodes, p.Node) {
				h.Nodes = append(h.Nodes, p.Node)
			}
		}
	}
}
