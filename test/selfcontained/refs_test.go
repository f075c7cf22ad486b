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

// allowedOutside is the one reference allowed: the Makefile's default of
// CA_SOURCE, the cluster-autoscaler source tarball. It is the one build input
// that may come from beside the checkout, because the Go module proxy does
// not serve k8s.io/autoscaler/cluster-autoscaler (the issue that added the
// autoscaler tests allows exactly this); it is overridable, and where it is
// absent make tools goes on and the autoscaler tests say what is missing.
// Only that one assignment, in that one file, is allowed.
func allowedOutside(name, line string) bool {
	return name == "Makefile" && strings.HasPrefix(line, "CA_SOURCE ?= ")
}

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
				if strings.Contains(line, p) && !allowedOutside(name, line) {
					t.Errorf("%s:%d refers outside the checkout (%q): %s", name, i+1, p, strings.TrimSpace(line))
				}
			}
		}
	}
}

// The exception is as narrow as it says: the one assignment in the
// Makefile, nothing else there or anywhere.
func TestTheOneAllowedReferenceIsTheAutoscalerSource(t *testing.T) {
	line := "CA_SOURCE ?= $(CURDIR)/" + path.Join("..", steering, "third_party", "x.tar.gz")
	if !allowedOutside("Makefile", line) {
		t.Error("the Makefile's CA_SOURCE default is not allowed")
	}
	for _, c := range []struct{ name, line string }{
		{"README.md", line},
		{"Makefile", "OTHER ?= " + path.Join("..", steering, "third_party", "x")},
		{"Makefile", "\ttar -xzf " + path.Join("..", steering, "third_party", "x")},
	} {
		if allowedOutside(c.name, c.line) {
			t.Errorf("%s: %q is allowed", c.name, c.line)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if allowedOutside("Makefile", l) && strings.Contains(l, path.Join("..", steering)) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the Makefile has %d CA_SOURCE defaults naming the folder beside the checkout, want 1", n)
	}
}
