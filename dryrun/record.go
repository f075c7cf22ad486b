// Package dryrun runs the manager without changing anything: every mutating
// AWS call is answered locally instead of being sent (Transport), every
// mutating Kubernetes call is sent with dryRun=All, so the API server
// validates but stores nothing (Client), and each is recorded as a log line
// and a "DryRun" Event "would …" on the InstanceGroup it was made for.
// Reads are real, so what is recorded is what a real run would do now.
package dryrun

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// EventReason is the reason of the "would …" Events.
const EventReason = "DryRun"

type objectKey struct{}

// WithObject returns ctx carrying obj, the object the calls made with ctx
// are for: their "would …" Events are about it.
func WithObject(ctx context.Context, obj runtime.Object) context.Context {
	return context.WithValue(ctx, objectKey{}, obj)
}

// Recorder records what a dry run would do.
type Recorder struct {
	// Events receives the "would …" Events (nil: log lines only).
	Events events.EventRecorder
	// Observe, when set, also gets every call (tests).
	Observe func(call string)
}

// Record logs "would <call>" and, when ctx carries an object (WithObject)
// or obj is given, posts a DryRun Event about it.
func (r *Recorder) Record(ctx context.Context, obj runtime.Object, format string, args ...any) {
	call := r.Log(ctx, format, args...)
	if obj == nil {
		obj, _ = ctx.Value(objectKey{}).(runtime.Object)
	}
	if obj != nil && r.Events != nil {
		r.Events.Eventf(obj, nil, corev1.EventTypeNormal, EventReason, "DryRun", "would %s", call)
	}
}

// Log logs "would <call>" without an Event (status writes, which every
// reconcile makes) and returns the call.
func (r *Recorder) Log(ctx context.Context, format string, args ...any) string {
	call := fmt.Sprintf(format, args...)
	log.FromContext(ctx).Info("dry run: would "+call, "dryRun", true)
	if r.Observe != nil {
		r.Observe(call)
	}
	return call
}

// Write logs each line written as a call a dry run would make (the drain
// helper's "evicting pod <ns>/<name> (server dry run)"), so a Recorder is
// the io.Writer of drain.Drainer.DryRun.
func (r *Recorder) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line != "" {
			r.Log(context.Background(), "%s", line)
		}
	}
	return len(p), nil
}
