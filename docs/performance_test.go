package docs

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// performancePage and its table of current figures: rows
// "| `name` | value | unit | group |" under currentHeading.
const (
	performancePage = "performance.md"
	currentHeading  = "## Current figures"
	benchResults    = "../test/bench/results.json" // make bench writes it (git-ignored)
	benchSources    = "../test/bench"
)

var (
	figureRow = regexp.MustCompile("^\\| `([a-z0-9_]+)` \\| ([0-9.]+) \\| ([^|]+) \\| ([a-z]+) \\|$")
	pageDate  = regexp.MustCompile(`full ` + "`make bench`" + ` \((\d{4}-\d{2}-\d{2})\)`)
	// reportCall is how test/bench names a figure: report("name", ...) or
	// report(fmt.Sprintf("name_%d", n), ...), possibly with +suffix.
	reportCall = regexp.MustCompile(`report\((?:fmt\.Sprintf\()?"([a-z0-9_%]+)"`)
)

// pageFigure is one row of the current figures.
type pageFigure struct {
	name, unit, group string
	value             float64
	decimals          int // as written: the precision a measured value is rounded to
}

// readPerformancePage returns the page's date and its figures.
func readPerformancePage(text string) (date string, figures []pageFigure, problems []string) {
	if m := pageDate.FindStringSubmatch(text); m != nil {
		date = m[1]
	} else {
		problems = append(problems, "no date of the run (\"full `make bench` (YYYY-MM-DD)\")")
	}
	_, section, ok := strings.Cut(text, "\n"+currentHeading+"\n")
	if !ok {
		return date, nil, append(problems, "no section "+currentHeading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, line := range strings.Split(section, "\n") {
		m := figureRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			problems = append(problems, "figure "+m[1]+": value "+m[2]+" is not a number")
			continue
		}
		dec := 0
		if _, frac, ok := strings.Cut(m[2], "."); ok {
			dec = len(frac)
		}
		figures = append(figures, pageFigure{name: m[1], value: v, unit: strings.TrimSpace(m[3]), group: m[4], decimals: dec})
	}
	if len(figures) == 0 {
		problems = append(problems, "the section "+currentHeading+" has no rows \"| `name` | value | unit | group |\"")
	}
	return date, figures, problems
}

// reportedNames reads test/bench's sources for the names it reports, as
// patterns: %d is a number, and any name may carry the _http2 suffix of the
// run with --webhook-http2.
func reportedNames(t *testing.T) []*regexp.Regexp {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(benchSources, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources in %s (%v)", benchSources, err)
	}
	var out []*regexp.Regexp
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reportCall.FindAllStringSubmatch(string(b), -1) {
			p := strings.ReplaceAll(regexp.QuoteMeta(m[1]), "%d", `\d+`)
			p = strings.ReplaceAll(p, "%s", "")
			out = append(out, regexp.MustCompile("^"+p+"(_http2)?$"))
		}
	}
	return out
}

// TestPerformanceTable keeps docs/performance.md's figures honest: every
// row names a figure test/bench reports, in one of the groups -only
// accepts; and when test/bench/results.json (written by make bench) is of
// the page's day, every row's value is that run's, rounded as written.
// A newer results.json is only logged: the page is updated by hand from it.
func TestPerformanceTable(t *testing.T) {
	text, err := os.ReadFile(performancePage)
	if err != nil {
		t.Fatal(err)
	}
	date, figures, problems := readPerformancePage(string(text))
	for _, p := range problems {
		t.Errorf("docs/%s: %s", performancePage, p)
	}
	names := reportedNames(t)
	groups := map[string]bool{"admission": true, "apiserver": true, "aws": true, "rss": true, "fleet": true}
	for _, f := range figures {
		known := false
		for _, n := range names {
			known = known || n.MatchString(f.name)
		}
		if !known {
			t.Errorf("docs/%s: figure %s is not one test/bench reports (report(...) in %s)", performancePage, f.name, benchSources)
		}
		if !groups[f.group] {
			t.Errorf("docs/%s: figure %s: group %q, want one of admission, apiserver, aws, rss, fleet (go run ./test/bench -only)", performancePage, f.name, f.group)
		}
	}

	raw, err := os.ReadFile(benchResults)
	if os.IsNotExist(err) {
		t.Logf("no %s (make bench writes it): values not compared", benchResults)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Date    string `json:"date"`
		Figures []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Unit  string  `json:"unit"`
		} `json:"figures"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s: %v", benchResults, err)
	}
	if !strings.HasPrefix(res.Date, date) {
		t.Logf("%s is of %s, the page of %s: values not compared (update the page from it)", benchResults, res.Date, date)
		return
	}
	measured := map[string]float64{}
	for _, f := range res.Figures {
		measured[f.Name] = f.Value
	}
	for _, f := range figures {
		v, ok := measured[f.name]
		if !ok {
			continue // that group was not run (-only) or skipped
		}
		scale := math.Pow(10, float64(f.decimals))
		if math.Round(v*scale)/scale != f.value && math.Abs(v-f.value) > 0.5/scale {
			t.Errorf("docs/%s: %s is %v, the run of %s measured %v", performancePage, f.name, f.value, res.Date, v)
		}
	}
}

// The page reader finds the rows and what is wrong with a page.
func TestReadPerformancePage(t *testing.T) {
	date, figs, problems := readPerformancePage("The latest full `make bench` (2026-11-25), here.\n\n" + currentHeading + "\n\n| figure | value | unit | group |\n|---|---|---|---|\n| `fanout_ratio` | 1.05 | ratio | apiserver |\n| `manager_rss_mib_2000_groups_10000_nodes` | 177 | MiB | rss |\n\n## Next\n| `after` | 1 | s | aws |\n")
	if date != "2026-11-25" || len(problems) != 0 || len(figs) != 2 || figs[0].decimals != 2 || figs[1].value != 177 {
		t.Errorf("got date %q, figures %+v, problems %q", date, figs, problems)
	}
	_, _, problems = readPerformancePage("no date\n\n" + currentHeading + "\n\nnothing\n")
	if len(problems) != 2 {
		t.Errorf("a page without a date or rows: problems %q, want 2", problems)
	}
}
