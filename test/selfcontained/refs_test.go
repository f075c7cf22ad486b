package selfcontained

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// outsidePatterns are how a file reads or points at the steering folder
// beside the checkout (built from parts so that this file does not match
// itself).
var outsidePatterns = []string{path.Join("..", steering), path.Join(steering, "examples")}

const steering = "shared"

// allowedOutside is the one input that may come from beside the checkout:
// the cluster-autoscaler source, which the Go module proxy does not serve.
const allowedOutside = "third_party"

// TestNothingRefersOutsideTheCheckout reads every file git tracks (or
// would: untracked, not ignored) and fails on a line that refers to the
// steering folder beside the checkout, so that docs and scripts, which no test runs, stay
// self-contained too. This package's own sources, which name the pattern,
// are skipped.
func TestNothingRefersOutsideTheCheckout(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the copy TestUnitTierPassesInACopyWithNothingBesideIt makes has no .git", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if strings.HasPrefix(name, "test/selfcontained/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			continue // deleted in the working tree, or binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, p := range outsidePatterns {
				if strings.Contains(line, p) && !strings.Contains(line, allowedOutside) {
					t.Errorf("%s:%d refers outside the checkout (%q): %s", name, i+1, p, strings.TrimSpace(line))
				}
			}
		}
	}
}
