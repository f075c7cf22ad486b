package nodehealth

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// Defaults of spec.eks.nodeHealth.
const (
	// DefaultStartupTimeout is how long an instance may run without a Ready
	// node: the instance-init-time of kubernetes-ec2-autoscaler.
	DefaultStartupTimeout = 15 * time.Minute
	// DefaultUnhealthyTimeout is how long a node may be NotReady.
	DefaultUnhealthyTimeout = 5 * time.Minute
	// DefaultMaxReplacing is the share of a group replaced at once.
	DefaultMaxReplacing = "10%"
	// HaltShare is the share of a group's instances (rounded up) that may
	// be unhealthy at once; above it replacement halts.
	HaltShare = "20%"
)

// Reasons an instance is unhealthy.
const (
	// ReasonStartupTimeout: no Node registered within the startup timeout
	// after the instance's launch.
	ReasonStartupTimeout = "StartupTimeout"
	// ReasonNotReady: the Node has been NotReady (or Unknown) longer than
	// the unhealthy timeout, and the instance is past its startup timeout.
	ReasonNotReady = "NotReady"
)

// Settings are a group's node health settings with the defaults applied.
type Settings struct {
	StartupTimeout, UnhealthyTimeout time.Duration
	MaxReplacing                     intstr.IntOrString
}

// SettingsOf resolves spec.eks.nodeHealth of ig.
func SettingsOf(ig *v1alpha1.InstanceGroup) Settings {
	s := Settings{StartupTimeout: DefaultStartupTimeout, UnhealthyTimeout: DefaultUnhealthyTimeout, MaxReplacing: intstr.FromString(DefaultMaxReplacing)}
	if ig.Spec.EKS == nil || ig.Spec.EKS.NodeHealth == nil {
		return s
	}
	h := ig.Spec.EKS.NodeHealth
	if h.StartupTimeout != nil && h.StartupTimeout.Duration > 0 {
		s.StartupTimeout = h.StartupTimeout.Duration
	}
	if h.UnhealthyTimeout != nil && h.UnhealthyTimeout.Duration > 0 {
		s.UnhealthyTimeout = h.UnhealthyTimeout.Duration
	}
	if h.MaxReplacing != nil {
		s.MaxReplacing = *h.MaxReplacing
	}
	return s
}

// Unhealthy is an instance judged unhealthy.
type Unhealthy struct {
	Instance providers.Instance
	// Node is the name of its Node ("" when none registered).
	Node string
	// Reason is ReasonStartupTimeout or ReasonNotReady.
	Reason string
	// Detail says what was seen, for Events and the condition.
	Detail string
}

// Verdict is the judgement of one group's instances at one moment.
type Verdict struct {
	// Judged is how many instances were judged: InService ones whose
	// nodes are not being rotated.
	Judged int
	// Unhealthy are the unhealthy ones, by instance id.
	Unhealthy []Unhealthy
	// Failing counts the unhealthy instances and those on their way: past
	// their startup timeout with a NotReady node, however short the time
	// since it became NotReady. A mass failure (a bad image, a zone or
	// network outage) so halts at once rather than a node at a time.
	Failing int
	// Limit is how many may be failing at once before replacement halts
	// (HaltShare of Judged, rounded up).
	Limit int
	// Halted is true when more than Limit are failing: nothing is
	// replaced.
	Halted bool
	// Replace are the instances to replace now: unhealthy ones within the
	// MaxReplacing budget left by replacements still in flight.
	Replace []Unhealthy
	// InFlight counts instances launching or terminating (Pending*,
	// Terminating*), taken as replacements not finished yet.
	InFlight int
	// NextCheck is how long until the earliest instance not yet judged
	// unhealthy would be (0: none pending).
	NextCheck time.Duration
}

// Judge judges the instances of a group with nodes (by providerID) at
// now. Instances in Standby, launching or terminating are not judged;
// neither are nodes a rotation is draining (annotation drainAnnotation),
// nor instances whose launch time is unknown.
func Judge(now time.Time, s Settings, instances []providers.Instance, nodes map[string]*corev1.Node, drainAnnotation string) Verdict {
	var v Verdict
	var next time.Duration
	wait := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	sorted := append([]providers.Instance(nil), instances...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, in := range sorted {
		if strings.HasPrefix(in.LifecycleState, "Pending") || strings.HasPrefix(in.LifecycleState, "Terminating") {
			v.InFlight++
			continue
		}
		if !in.InService() {
			continue
		}
		node := nodes[in.ProviderID]
		if node != nil {
			if _, draining := node.Annotations[drainAnnotation]; draining {
				continue
			}
		}
		v.Judged++
		if in.LaunchTime.IsZero() {
			continue
		}
		startupEnds := in.LaunchTime.Add(s.StartupTimeout)
		if node == nil {
			if now.Before(startupEnds) {
				wait(startupEnds.Sub(now))
				continue
			}
			v.Failing++
			v.Unhealthy = append(v.Unhealthy, Unhealthy{Instance: in, Reason: ReasonStartupTimeout,
				Detail: fmt.Sprintf("instance %s, launched at %s, has no Node after the startup timeout %s",
					in.ID, in.LaunchTime.UTC().Format(time.RFC3339), s.StartupTimeout)})
			continue
		}
		ready, since := readiness(node)
		if ready {
			continue
		}
		if !now.Before(startupEnds) {
			v.Failing++
		}
		deadline := since.Add(s.UnhealthyTimeout)
		if deadline.Before(startupEnds) {
			deadline = startupEnds
		}
		if now.Before(deadline) {
			wait(deadline.Sub(now))
			continue
		}
		v.Unhealthy = append(v.Unhealthy, Unhealthy{Instance: in, Node: node.Name, Reason: ReasonNotReady,
			Detail: fmt.Sprintf("Node %s of instance %s has not been Ready since %s, past the unhealthy timeout %s",
				node.Name, in.ID, since.UTC().Format(time.RFC3339), s.UnhealthyTimeout)})
	}
	v.NextCheck = next
	v.Limit = scaled(intstr.FromString(HaltShare), v.Judged)
	v.Halted = v.Failing > v.Limit
	if v.Halted {
		return v
	}
	budget := scaled(s.MaxReplacing, v.Judged)
	if s.MaxReplacing.Type == intstr.String || s.MaxReplacing.IntVal > 0 {
		budget = max(budget, 1)
	}
	budget -= v.InFlight
	for _, u := range v.Unhealthy {
		if budget <= 0 {
			break
		}
		v.Replace = append(v.Replace, u)
		budget--
	}
	return v
}

// readiness reports whether node is Ready and since when its Ready
// condition has had its status (the Node's creation when it has none).
func readiness(node *corev1.Node) (bool, time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			since := c.LastTransitionTime.Time
			if since.IsZero() {
				since = node.CreationTimestamp.Time
			}
			return c.Status == corev1.ConditionTrue, since
		}
	}
	return false, node.CreationTimestamp.Time
}

// scaled is a count, or a percentage of total rounded up; invalid values
// count as 0 (admission refuses them).
func scaled(v intstr.IntOrString, total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
