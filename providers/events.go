package providers

import (
	"context"
	"fmt"
)

// Reasons of the Events provisioners emit through Emit.
const (
	// ReasonAdopted: a resource left by an earlier InstanceGroup of the
	// same name (its finalizer did not run) was taken over and retagged
	// with this group's UID (ownership.Adopter).
	ReasonAdopted = "Adopted"
	// ReasonRecreated: a resource the group owns was found deleted by
	// someone else and was created again (an IAM role deleted by hand).
	ReasonRecreated = "CloudResourceRecreated"
	// ReasonAccessEntryReplaced: an EKS access entry created for an
	// earlier role of the same ARN was deleted and created again.
	ReasonAccessEntryReplaced = "AccessEntryReplaced"
)

// EventSink receives what a provisioner wants the group's users to see:
// eventType is corev1.EventTypeNormal or EventTypeWarning.
type EventSink func(eventType, reason, message string)

type eventsKey struct{}

// WithEvents returns ctx carrying sink for the provisioner's Apply and
// Delete: the reconciler records each as a Kubernetes Event on the group.
func WithEvents(ctx context.Context, sink EventSink) context.Context {
	return context.WithValue(ctx, eventsKey{}, sink)
}

// Emit sends an Event (eventType "Normal" or "Warning", reason, a
// printf-style message) to the sink ctx carries; without one (a
// provisioner's unit tests) it does nothing.
func Emit(ctx context.Context, eventType, reason, format string, args ...any) {
	if sink, ok := ctx.Value(eventsKey{}).(EventSink); ok && sink != nil {
		sink(eventType, reason, fmt.Sprintf(format, args...))
	}
}

// EventsFrom returns the sink ctx carries, nil when none.
func EventsFrom(ctx context.Context) EventSink {
	sink, _ := ctx.Value(eventsKey{}).(EventSink)
	return sink
}
