package harness

import (
	"context"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// groupEvents returns the events.k8s.io/v1 Events of reason regarding ig
// (by name, in its namespace); a List error fails the test.
func (s *Suite) groupEvents(t testing.TB, ig *v1alpha1.InstanceGroup, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := s.Admin.List(context.Background(), list, client.InNamespace(ig.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == ig.Name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// EventNotes returns the notes of ig's Events of reason, one per Event
// object (a series is one).
func (s *Suite) EventNotes(t testing.TB, ig *v1alpha1.InstanceGroup, reason string) []string {
	t.Helper()
	var out []string
	for _, e := range s.groupEvents(t, ig, reason) {
		out = append(out, e.Note)
	}
	return out
}

// EventCount counts ig's Events of reason, an Event series counting as
// its series count.
func (s *Suite) EventCount(t testing.TB, ig *v1alpha1.InstanceGroup, reason string) int {
	t.Helper()
	n := 0
	for _, e := range s.groupEvents(t, ig, reason) {
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}
