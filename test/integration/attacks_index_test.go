package integration

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// section3Rows are the admin-side edits of the 2026-11-26 security
// review's section 3, as docs/security.md's table and the tests' comments
// ("Section 3 (<row>)") name them.
var section3Rows = []string{
	"ancestor share", "excluded namespace", "relaxing a rule", "absent crdStrategy", "crdStrategy kinds",
	"maxTotalVCPU without maxSize", "namespaces quota entry", "rollout waves", "conditionals",
	"installation-id", "iam-path", "clusterName",
}

// closedFindings are the findings of the 2026-11-29 security review
// (N22 to N39) closed so far: each has a row keyed by the finding in
// docs/security.md's table, naming a test of the integration or
// end-to-end tier (test/integration, test/e2e). Add a finding here when
// it is closed.
var closedFindings = []string{"N24", "N28", "N30", "N31", "N33"}

var testName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// TestEveryAttackHasATest keeps issue 25's "every attack has an
// integration test" true: docs/security.md's table "Attacks and their tests" has a
// row for each attack 01-27 of the review and each section 3 row; every
// test a row names exists; each attack is named ("Attack NN") by a test
// of this package, and each section 3 row ("Section 3 (<row>)") unless
// its row there says it is unit-tested only. Needs no environment.
func TestEveryAttackHasATest(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(page), "\n### Attacks and their tests\n")
	if !ok {
		t.Fatal(`docs/security.md has no section "### Attacks and their tests"`)
	}
	if end := strings.Index(table, "\n#"); end >= 0 {
		table = table[:end]
	}
	rows := map[string]string{} // first cell -> the row
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		rows[strings.TrimSpace(cells[1])] = line
	}

	integration := ""
	files, _ := filepath.Glob(filepath.Join(repoRoot, "test", "integration", "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		integration += string(b)
	}
	defined := definedTests(t)

	check := func(key, marker string) {
		row, ok := rows[key]
		if !ok {
			t.Errorf("docs/security.md's table has no row %q", key)
			return
		}
		names := testName.FindAllString(row, -1)
		if len(names) == 0 {
			t.Errorf("docs/security.md row %q names no test", key)
		}
		for _, n := range names {
			if defined[n] == "" {
				t.Errorf("docs/security.md row %q names %s, which no _test.go file defines", key, n)
			}
		}
		if marker != "" && !strings.Contains(integration, marker) && !strings.Contains(row, "unit test only") {
			t.Errorf("no test in test/integration says %q", marker)
		}
	}
	for n := 1; n <= 27; n++ {
		check(fmt.Sprintf("%02d", n), fmt.Sprintf("Attack %02d", n))
	}
	for _, r := range section3Rows {
		check("§3 "+r, "Section 3 ("+r+")")
	}
	for _, f := range closedFindings {
		check(f, "")
		tiered := false
		for _, n := range testName.FindAllString(rows[f], -1) {
			tiered = tiered || strings.HasPrefix(defined[n], "test/integration/") || strings.HasPrefix(defined[n], "test/e2e/")
		}
		if _, ok := rows[f]; ok && !tiered {
			t.Errorf("docs/security.md row %q names no test of test/integration or test/e2e", f)
		}
	}
}

// definedTests returns the names of the Test functions of every _test.go
// file of the repository, each with its file's slash path from the root.
func definedTests(t *testing.T) map[string]string {
	t.Helper()
	funcTest := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	out := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == ".venv" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		for _, m := range funcTest.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = filepath.ToSlash(rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
