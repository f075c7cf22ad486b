package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codePath is a path written as code in architecture.md: `a/b/` or `a/b`.
var codePath = regexp.MustCompile("`([a-z0-9][a-z0-9_./-]*)`")

// TestArchitectureMatchesTheTree keeps docs/architecture.md's rooms true:
// every directory holding a Go package (outside testdata, tools' modules and
// the tool links; a command under <room>/cmd/ goes with its room) is named
// in it, and every path it names exists.
func TestArchitectureMatchesTheTree(t *testing.T) {
	text, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range codePath.FindAllStringSubmatch(string(text), -1) {
		p := strings.TrimSuffix(m[1], "/")
		if !strings.Contains(p, "/") && !strings.HasSuffix(m[1], "/") {
			continue // a word in code (a flag value, a type), not a path
		}
		if strings.HasSuffix(p, ".go") || strings.Contains(p, ".") {
			continue
		}
		named[p] = true
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", m[1])
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "bin", rel == "tools", rel == "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || rel == "main.go" {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		// A command's main package (…/cmd/<name>) belongs to the room above.
		if i := strings.Index(dir, "/cmd/"); i >= 0 && named[dir[:i]] {
			return nil
		}
		if named[dir] {
			return nil
		}
		t.Errorf("docs/architecture.md does not name %s (a Go package): add it to the rooms", dir)
		named[dir] = true // once per directory
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
