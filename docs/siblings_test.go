package docs

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// provisionerType marks a provisioner package: a directory right under
// providers/ that declares the Provisioner type (eks, eksmanaged,
// eksfargate, and any provisioner added later).
var provisionerType = regexp.MustCompile(`(?m)^type Provisioner struct`)

// TestNoProvisionerImportsAnother keeps the rule docs/architecture.md
// states: the provisioners are siblings over the shared AWS core
// (providers/aws/...); no file of one (tests included, sub-packages
// included) imports another, so what two of them share lives in the core.
func TestNoProvisionerImportsAnother(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	module := modulePath(t, filepath.Join(root, "go.mod"))
	provisioners := provisionerPackages(t, filepath.Join(root, "providers"))
	if len(provisioners) < 2 {
		t.Fatalf("found %d provisioner packages under providers/ (%v); the check needs at least two", len(provisioners), provisioners)
	}
	for _, p := range provisioners {
		_, err := eachImport(root, filepath.Join("providers", p), func(rel, ip string) {
			for _, other := range provisioners {
				pkg := module + "/providers/" + other
				if other != p && (ip == pkg || strings.HasPrefix(ip, pkg+"/")) {
					t.Errorf("%s (provisioner %s) imports %s, another provisioner: move what they share to providers/aws/...", rel, p, ip)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// eachImport calls fn with the path (relative to root, slash-separated)
// and each import path of every Go file under root/dir, tests and
// sub-packages included, testdata left out. It returns the number of
// files read and the first error walking or parsing.
func eachImport(root, dir string, fn func(rel, importPath string)) (int, error) {
	files := 0
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			fn(filepath.ToSlash(rel), ip)
		}
		return nil
	})
	return files, err
}

// provisionerPackages are the names of the directories right under
// providersDir whose non-test Go files declare the Provisioner type, sorted.
func provisionerPackages(t *testing.T, providersDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(providersDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(providersDir, e.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if provisionerType.Match(src) {
				out = append(out, e.Name())
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// modulePath is the module line of go.mod.
func modulePath(t *testing.T, gomod string) string {
	t.Helper()
	f, err := os.Open(gomod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatalf("%s has no module line", gomod)
	return ""
}
