package drain

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationDrainOwner names who started a node's drain (an Owner). Only
// that owner gives the node back (Drainer.Release); a drain for an
// instance that goes anyway takes the node over from one that could be
// undone (Drainer.Start), never the other way round.
const AnnotationDrainOwner = "instancemgr.keikoproj.io/drain-owner"

// Owner is who started a drain: the value of AnnotationDrainOwner.
type Owner string

// The owners of drains. A rotation's and a give-back's drains can be
// undone (the instance stays when the rotation waits, stalls or stops);
// the others drain an instance that is going whatever happens, and no
// other controller may stop them.
const (
	// OwnerRotation: a rotation drains a drifted instance's node
	// (reconciler/upgrade), to terminate it without a capacity decrement.
	OwnerRotation Owner = "rotation"
	// OwnerSurge: a rotation with maxSurge, or the give-back after it,
	// drains a node whose instance is terminated with a capacity
	// decrement (AnnotationSurge is set too).
	OwnerSurge Owner = "surge"
	// OwnerRetire: an eks-managed or eks-fargate replacement drains the
	// old node group's or profile's nodes before deleting it.
	OwnerRetire Owner = "retire"
	// OwnerDelete: the InstanceGroup is being deleted.
	OwnerDelete Owner = "delete"
	// OwnerGC: the garbage collector drains an orphan's nodes.
	OwnerGC Owner = "gc"
	// OwnerTermination: Auto Scaling is terminating the instance (the
	// drain lifecycle hook holds it in Terminating:Wait).
	OwnerTermination Owner = "termination"
	// OwnerInterruption: EC2 is about to reclaim or stop the instance (a
	// spot interruption warning or a state change from the queue).
	OwnerInterruption Owner = "interruption"
)

// rank orders owners for a take-over: a drain whose instance goes anyway
// (2) outranks a replacement's (1), which outranks one that can be undone
// (0).
func (o Owner) rank() int {
	switch o {
	case OwnerRotation, OwnerSurge:
		return 0
	case OwnerRetire:
		return 1
	default:
		return 2
	}
}

// OwnerOf returns who started node's drain, "" when it is not being
// drained (no AnnotationDrainStarted). A drain started before owners were
// recorded (no AnnotationDrainOwner) is a rotation's, or surge's when it
// carries AnnotationSurge: the only drains that version released.
func OwnerOf(node *corev1.Node) Owner {
	if !Marked(node) {
		return ""
	}
	if o := Owner(node.Annotations[AnnotationDrainOwner]); o != "" {
		return o
	}
	if node.Annotations[AnnotationSurge] == "true" {
		return OwnerSurge
	}
	return OwnerRotation
}

// OwnedBy reports whether node is being drained by one of owners.
func OwnedBy(node *corev1.Node, owners ...Owner) bool {
	o := OwnerOf(node)
	return o != "" && slices.Contains(owners, o)
}

// takesOver reports whether a Start by o replaces the current owner cur
// ("" : no drain): a drain for an instance that goes outranks one that
// could be undone; equals keep the first.
func takesOver(o, cur Owner) bool {
	return cur == "" || o.rank() > cur.rank()
}

// NeedsStart reports whether owner must call Drainer.Start on node before
// polling its drain: the node is not cordoned, carries no drain, or
// carries one owner outranks (and so takes over).
func NeedsStart(node *corev1.Node, owner Owner) bool {
	cur := OwnerOf(node)
	return !node.Spec.Unschedulable || cur == "" || (cur != owner && takesOver(owner, cur))
}
