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

// fixedFindings are the findings of the 2026-11-29 review fixed so far
// (issue 37): each has a row "N<nn>" in docs/security.md's table and a
// test of the integration or end-to-end tier saying "Finding N<nn>".
var fixedFindings = []string{"N28"}

var testName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// TestEveryAttackHasATest keeps issue 25's "every attack has an
// integration test" true: docs/security.md's table "Attacks and their tests" has a
// row for each attack 01-27 of the review and each section 3 row; every
// test a row names exists; each attack is named ("Attack NN") by a test
// of this package, and each section 3 row ("Section 3 (<row>)") unless
// its row there says it is unit-tested only. The same for issue 37's
// fixedFindings ("Finding Nnn"), whose tests may be end-to-end ones
// (test/e2e). Needs no environment.
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

	integration := testSources(t, filepath.Join(repoRoot, "test", "integration", "*_test.go"))
	e2e := testSources(t, filepath.Join(repoRoot, "test", "e2e", "*", "*_test.go"))
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
			if !defined[n] {
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
	for _, f := range fixedFindings {
		check(f, "")
		if marker := "Finding " + f + " "; !strings.Contains(integration+e2e, marker) {
			t.Errorf("no test in test/integration or test/e2e says %q", marker)
		}
	}
}

// testSources returns the text of the files matching pattern.
func testSources(t *testing.T, pattern string) string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return all.String()
}

// definedTests returns the names of the Test functions of every _test.go
// file of the repository.
func definedTests(t *testing.T) map[string]bool {
	t.Helper()
	funcTest := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	out := map[string]bool{}
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
		for _, m := range funcTest.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
