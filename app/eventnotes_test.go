package app

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

func TestBoundNote(t *testing.T) {
	for _, tc := range []struct {
		name, note string
		cut        bool
	}{
		{"short", "Rollout halted at wave canary", false},
		{"exactly the limit", strings.Repeat("a", noteLimit), false},
		{"one byte over", strings.Repeat("a", noteLimit+1), true},
		{"many groups", strings.Repeat("tenant-a/workers: 2 of 3 nodes not Ready; ", 200), true},
		// Three-byte runes put a boundary inside the cut point.
		{"multi-byte runes", strings.Repeat("节点", 400), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := boundNote(tc.note)
			if len(got) > noteLimit {
				t.Fatalf("%d bytes, over the API server's %d", len(got), noteLimit)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("not valid UTF-8: %q", got[len(got)-40:])
			}
			if !tc.cut {
				if got != tc.note {
					t.Fatalf("a note that fits was changed: %q", got)
				}
				return
			}
			marker := fmt.Sprintf(" … (cut: the note had %d bytes)", len(tc.note))
			if !strings.HasSuffix(got, marker) || !strings.HasPrefix(tc.note, strings.TrimSuffix(got, marker)) {
				t.Fatalf("want the note's beginning and %q, got %q", marker, got)
			}
			if len(tc.note) < noteLimit+10 {
				return
			}
			if len(got) < noteLimit-utf8.UTFMax {
				t.Fatalf("cut to %d bytes, want the most that fits (%d)", len(got), noteLimit)
			}
		})
	}
}

// notes keeps every note it is given.
type notes struct {
	events.EventRecorder
	got []string
}

func (n *notes) Eventf(_, _ runtime.Object, _, _, _, note string, args ...interface{}) {
	n.got = append(n.got, fmt.Sprintf(note, args...))
}

func TestBoundedNotesFormatsThenCuts(t *testing.T) {
	inner := &notes{}
	r := boundedNotes{inner}
	pod := &corev1.Pod{}
	r.Eventf(pod, nil, corev1.EventTypeNormal, "NodeDrained", "Drain", "drained %s (%d pods, 100%%)", "node-1", 3)
	long := strings.Repeat("x", 3*noteLimit)
	r.Eventf(pod, nil, corev1.EventTypeWarning, "RolloutHalted", "Halt", "halted: %s", long)
	if len(inner.got) != 2 || inner.got[0] != "drained node-1 (3 pods, 100%)" {
		t.Fatalf("notes %q", inner.got)
	}
	if len(inner.got[1]) > noteLimit || !strings.HasPrefix(inner.got[1], "halted: xxx") {
		t.Fatalf("long note: %d bytes, %q…", len(inner.got[1]), inner.got[1][:20])
	}
}
