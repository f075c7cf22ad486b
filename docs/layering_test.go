package docs

import (
	"path/filepath"
	"strings"
	"testing"
)

// bottomRooms are the reconciler's packages that every controller uses
// and that use none of them (docs/architecture.md): the one drain path
// and the upgrade slots.
var bottomRooms = []string{"reconciler/drain", "reconciler/slots"}

// TestBottomRoomsImportNothingOfTheReconciler keeps reconciler/drain and
// reconciler/slots at the bottom of the reconciler: no file of theirs
// (tests and sub-packages included) imports another package under
// reconciler/, so the controllers that drain nodes or hold slots depend
// on them and never the other way round.
func TestBottomRoomsImportNothingOfTheReconciler(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	module := modulePath(t, filepath.Join(root, "go.mod"))
	for _, room := range bottomRooms {
		files, err := eachImport(root, room, func(rel, ip string) {
			inside, ok := strings.CutPrefix(ip, module+"/")
			if ok && strings.HasPrefix(inside, "reconciler/") && inside != room && !strings.HasPrefix(inside, room+"/") {
				t.Errorf("%s imports %s: %s is at the bottom of the reconciler and may import nothing of it (move what it needs into it, or the caller's logic out of it)", rel, ip, room)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			t.Errorf("%s has no Go file: the rule checks nothing", room)
		}
	}
}
