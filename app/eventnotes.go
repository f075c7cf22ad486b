package app

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// noteLimit is the API server's bound on an Event's note, in bytes
// (k8s.io/kubernetes pkg/apis/core/validation NoteLengthLimit, checked on
// every events.k8s.io/v1 Event). The API server refuses a whole Event whose
// note is longer, so a halt naming hundreds of groups, or a drain blocked
// by many pods, would leave no Event at all.
const noteLimit = 1024

// boundedNotes is the manager's Event recorder with every note formatted
// and then cut to noteLimit bytes (boundNote). The details stay where the
// Event points: the object's status and the rollout record.
type boundedNotes struct{ events.EventRecorder }

// Eventf formats note with args, as events.EventRecorder does, and records
// the result cut to noteLimit bytes.
func (r boundedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", boundNote(fmt.Sprintf(note, args...)))
}

// boundNote returns note unchanged when it fits in noteLimit bytes, and
// otherwise its beginning, cut on a UTF-8 rune boundary, followed by a
// marker giving the note's full length; the result is never longer than
// noteLimit bytes.
func boundNote(note string) string {
	if len(note) <= noteLimit {
		return note
	}
	marker := fmt.Sprintf(" … (cut: the note had %d bytes)", len(note))
	end := noteLimit - len(marker)
	for end > 0 && !utf8.RuneStart(note[end]) {
		end--
	}
	return note[:end] + marker
}
