package chart

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// scanFinding is one failed check of checkov's JSON report
// (results.failed_checks[]).
type scanFinding struct {
	CheckID   string `json:"check_id"`
	CheckName string `json:"check_name"`
	Resource  string `json:"resource"`
}

// scan renders r into a file and runs checkov's Kubernetes checks on it,
// returning the failed checks.
func scan(t *testing.T, checkov string, r release) []scanFinding {
	t.Helper()
	manifest := render(t, r).manifest
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(checkov, "--file", path, "--framework", "kubernetes", "--output", "json", "--quiet", "--skip-download")
	out, err := cmd.Output()
	// checkov exits 1 when a check fails; its report is the answer.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		stderr := ""
		if exit != nil {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("checkov: %v\n%s", err, stderr)
	}
	var report struct {
		Results struct {
			FailedChecks []scanFinding `json:"failed_checks"`
		} `json:"results"`
		Summary struct {
			ParsingErrors int    `json:"parsing_errors"`
			Version       string `json:"checkov_version"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("checkov printed %q: %v", out, err)
	}
	if report.Summary.ParsingErrors != 0 {
		t.Fatalf("checkov could not parse the rendering (%d parsing errors)", report.Summary.ParsingErrors)
	}
	t.Logf("checkov %s: %d failed checks", report.Summary.Version, len(report.Results.FailedChecks))
	return report.Results.FailedChecks
}

// justifiedRow matches a row of the README's table of findings that stay:
// "| CKV_K8S_38 (what it checks) | renderings | why |".
var justifiedRow = regexp.MustCompile(`^\| (CKV_[A-Z0-9_]+) \([^)]*\) \| [^|]+ \| (.+) \|$`)

// justifiedFindings reads the check ids the chart README justifies, with
// their reasons.
func justifiedFindings(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := justifiedRow.FindStringSubmatch(s.Text()); m != nil {
			out[m[1]] = m[2]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("charts/instance-manager/README.md has no table of security scan findings")
	}
	return out
}

// The rendered chart passes the security scan (checkov, make tools
// installs it into bin/checkov): every finding is justified in the chart
// README's table, and every row of the table is still found (a fixed
// finding leaves no stale justification behind). Pinning the image by
// digest removes the digest finding.
func TestRenderedChartPassesTheSecurityScan(t *testing.T) {
	checkov := tool(t, "checkov/bin/checkov")
	justified := justifiedFindings(t)
	digest := "sha256:" + strings.Repeat("0", 64)
	renderings := []struct {
		name string
		r    release
	}{
		{"defaults", release{Namespace: "im-system"}},
		{"cert-manager", release{Namespace: "im-system", Values: map[string]any{"certManager": map[string]any{"enabled": true}}}},
		{"image digest", release{Namespace: "im-system", Values: map[string]any{"image": map[string]any{"digest": digest}}}},
	}
	found := map[string]bool{}
	for _, c := range renderings {
		t.Run(c.name, func(t *testing.T) {
			findings := scan(t, checkov, c.r)
			for _, f := range findings {
				found[f.CheckID] = true
				if justified[f.CheckID] == "" {
					t.Errorf("%s on %s: %s (fix it, or justify it in charts/instance-manager/README.md)", f.CheckID, f.Resource, f.CheckName)
				}
			}
			if c.name == "image digest" && slices.ContainsFunc(findings, func(f scanFinding) bool { return f.CheckID == "CKV_K8S_43" }) {
				t.Errorf("image.digest %s set, yet CKV_K8S_43 (image by digest) still fails", digest)
			}
		})
	}
	if t.Failed() {
		return
	}
	for id := range justified {
		if !found[id] {
			t.Errorf("charts/instance-manager/README.md justifies %s, which no rendering finds any more: remove its row", id)
		}
	}
}
