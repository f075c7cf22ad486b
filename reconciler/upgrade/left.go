package upgrade

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// AnnotationTerminated (RFC 3339 time) marks a node whose instance the
// rotation terminated after draining it. While Auto Scaling still lists
// the instance as Terminating:* (a terminate lifecycle hook holds it in
// Terminating:Wait), the rotation counts it as gone: its pods were
// evicted, and its replacement is what the batch waits for.
const AnnotationTerminated = "instancemgr.keikoproj.io/rotation-terminated"

// ReasonTerminationHeld: an instance the rotation terminated after its
// drain has waited in Terminating:Wait for longer than HeldTermination, so
// a terminate lifecycle hook with no handler holds it (Warning Event, once
// per instance and controller run).
const ReasonTerminationHeld = "TerminationHeld"

// HeldTermination is how long an instance the rotation drained and
// terminated may wait in Terminating:Wait before a Warning says that a
// lifecycle hook holds it.
const HeldTermination = 10 * time.Minute

// driftedOf returns obs's instances the rotation replaces: not on the latest
// launch template version, not leaving the group (Terminating*: never
// terminated again, nothing owed for them) and not in Standby (Auto
// Scaling launches nothing for a Standby instance that is terminated
// without a decrement, and the operator took it out of service on
// purpose), and the drifted Standby instances, which are left alone.
func driftedOf(obs *providers.Observation) (replace []providers.Instance, standby []string) {
	for _, in := range obs.Instances {
		switch {
		case in.UpToDate, strings.HasPrefix(in.LifecycleState, "Terminating"):
		case providers.Standby(in):
			standby = append(standby, in.ID)
		default:
			replace = append(replace, in)
		}
	}
	return replace, standby
}

// standbyNote says which drifted instances are in Standby and left alone
// ("" for none), to append to a progress message.
func standbyNote(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d drifted instance(s) in Standby left alone until they leave Standby: %s", len(ids), strings.Join(ids, ", "))
}

// StandbyNote says which of obs's drifted instances are in Standby and
// left alone by the rotation ("" for none).
func StandbyNote(obs *providers.Observation) string {
	_, standby := driftedOf(obs)
	return strings.TrimPrefix(standbyNote(standby), "; ")
}

// left reports whether a Terminating* instance counts as gone for the
// rotation at now: it has no node (nothing to drain or wait for), or the
// rotation terminated it after draining its node (AnnotationTerminated)
// at least HeldTermination ago. Auto Scaling lists such an instance only
// as long as a terminate lifecycle hook holds it: the controller's drain
// hook completes at once for a drained node, so the rotation waits for it
// to go (a rotation reported done leaves no old instance behind), while a
// user's hook with no handler (its heartbeat timeout, up to two hours, or
// longer with heartbeats) must not hold every batch past HeldTermination.
func left(in providers.Instance, nodes map[string]*corev1.Node, now time.Time) bool {
	if !strings.HasPrefix(in.LifecycleState, "Terminating") {
		return false
	}
	node := nodes[in.ProviderID]
	if node == nil {
		return true
	}
	_, held := heldFor(node, now)
	return held
}

// heldFor returns how long ago the rotation terminated node's instance
// (AnnotationTerminated) and whether that is HeldTermination or more.
func heldFor(node *corev1.Node, now time.Time) (time.Duration, bool) {
	at, err := time.Parse(time.RFC3339, node.Annotations[AnnotationTerminated])
	if err != nil {
		return 0, false
	}
	return now.Sub(at), now.Sub(at) >= HeldTermination
}

// leavingNow is Leaving without the instances that count as gone at now
// (left).
func leavingNow(obs *providers.Observation, nodes map[string]*corev1.Node, now time.Time) []string {
	var ids []string
	for _, in := range obs.Instances {
		if !in.UpToDate && strings.HasPrefix(in.LifecycleState, "Terminating") && !left(in, nodes, now) {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// Rotating reports whether ig needs its rolling update to step: an
// instance to replace (driftedOf), a drifted instance still leaving whose
// node is there (leavingNow), or a batch record that is not settled
// (Unsettled: the last batch's replacements are not all Ready nodes).
// Drifted Standby instances, and instances that count as gone at now
// (left), do not keep a rotation going.
func Rotating(ig *v1alpha1.InstanceGroup, obs *providers.Observation, nodes map[string]*corev1.Node, now time.Time) bool {
	replace, _ := driftedOf(obs)
	return len(replace) > 0 || len(leavingNow(obs, nodes, now)) > 0 || Unsettled(ig, obs)
}

// markTerminated annotates node with AnnotationTerminated (now), once.
func (r *RollingUpdate) markTerminated(ctx context.Context, node *corev1.Node) error {
	if node.Annotations[AnnotationTerminated] != "" {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationTerminated] = r.Drainer.Now().UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("annotating node %s as terminated by the rotation: %w", node.Name, err)
	}
	return nil
}

// warnHeld emits ReasonTerminationHeld for each instance of obs in
// Terminating:Wait whose node the rotation terminated more than
// HeldTermination ago, once per instance and controller run.
func (r *RollingUpdate) warnHeld(ig *v1alpha1.InstanceGroup, obs *providers.Observation, nodes map[string]*corev1.Node) {
	now := r.Drainer.Now()
	for _, in := range obs.Instances {
		node := nodes[in.ProviderID]
		if in.LifecycleState != "Terminating:Wait" || node == nil {
			continue
		}
		ago, held := heldFor(node, now)
		if !held {
			continue
		}
		if _, seen := r.warned.LoadOrStore(in.ID, true); seen {
			continue
		}
		terminationsHeld.Inc()
		r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonTerminationHeld, "Rotate",
			"Instance %s (node %s), drained and terminated by the rotation %s ago, is still held in Terminating:Wait by a terminate lifecycle hook of Auto Scaling group %s "+
				"other than the controller's drain hook: a hook with no handler holds it until its heartbeat timeout, then applies its default result. "+
				"The rotation counts it as gone and goes on; complete the hook's lifecycle action (CompleteLifecycleAction) or give the hook a handler",
			in.ID, node.Name, ago.Round(time.Minute), obs.GroupName)
	}
}
