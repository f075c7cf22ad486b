package iam

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lintScript runs parliament (the IAM policy linter, pinned in
// test/env/requirements.txt) on the policy read from stdin and prints one
// JSON object per finding, with the Sid of the statement it is in: the
// last statement whose "Sid" line is at most one line below the
// finding's (parliament locates a finding at the statement's opening
// brace or inside it; the policy puts each Sid first in its statement).
const lintScript = `
import json, re, sys
import parliament
from parliament import analyze_policy_string, config
text = sys.stdin.read()
sids = [(i + 1, m.group(1)) for i, line in enumerate(text.splitlines()) for m in [re.search(r'"Sid":\s*"([^"]*)"', line)] if m]
print(json.dumps({"version": parliament.__version__, "statements": len(json.loads(text)["Statement"]), "sids": len(sids)}))
for f in analyze_policy_string(text).findings:
    loc = f.location if isinstance(f.location, dict) else {}
    line = loc.get("line") or 0
    sid = ""
    for at, name in sids:
        if at - 1 <= line:
            sid = name
    c = config.get(f.issue, {})
    print(json.dumps({"sid": sid, "issue": f.issue, "severity": c.get("severity", "UNKNOWN"), "detail": str(f.detail)}))
`

// lintFinding is one parliament finding.
type lintFinding struct {
	Sid, Issue, Severity, Detail string
}

// justified are findings of MEDIUM or above that the linter reports and
// AWS does not: each says why, with the AWS document. Keyed by Sid and
// issue; an entry the linter no longer reports fails the test (remove it).
var justified = map[[2]string]string{
	{"NodeAccessEntriesForNodeRolesOnly", "UNKNOWN_CONDITION_FOR_ACTION"}: "eks:principalArn and eks:accessEntryType are condition keys of the access-entry resource type " +
		"(Service Authorization Reference, Amazon EKS, \"Resource types defined by Amazon EKS\": access-entry lists aws:ResourceTag/${TagKey}, eks:accessEntryType, " +
		"eks:clusterName, eks:kubernetesGroups, eks:principalArn, eks:username), the one resource DeleteAccessEntry acts on; parliament 1.6.4 checks only the " +
		"keys listed on the action's own row, which is empty",
	{"RunInstancesFromOwnedLaunchTemplates", "RESOURCE_MISMATCH"}:  runInstancesSplit,
	{"RunInstancesInTheClusterVPC", "RESOURCE_MISMATCH"}:           runInstancesSplit,
	{"RunInstancesOtherResourcesOfTheLaunch", "RESOURCE_MISMATCH"}: runInstancesSplit,
}

// runInstancesSplit is why the RunInstances statements each name only some
// of the action's resource types.
const runInstancesSplit = "ec2:RunInstances is authorized per resource of the launch, and each resource may be allowed by a different statement " +
	"(IAM User Guide, \"Policy evaluation logic\"; Amazon EC2 User Guide, \"Example policies to control access to the Amazon EC2 API\", RunInstances " +
	"examples split by resource type): the policy splits it so that the launch template, the VPC resources and the rest each carry their own " +
	"conditions; parliament judges each statement alone and wants every required resource type in it"

// The controller's IAM policy passes parliament: no finding of MEDIUM or
// above that is not justified (above, and in docs/security.md, "IAM permissions of the controller").
// Needs the environment's venv (make tools installs parliament there).
func TestPolicyPassesTheLinter(t *testing.T) {
	venv := os.Getenv("IM_ENV_VENV")
	if venv == "" {
		t.Skip("needs the tools' venv with parliament (IM_ENV_VENV): run make test")
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", lintScript)
	cmd.Stdin = strings.NewReader(renderedPolicy(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("parliament: %v\n%s", err, stderr.String())
	}
	var findings []lintFinding
	seen := map[[2]string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i == 0 {
			var head struct {
				Version          string
				Statements, Sids int
			}
			if err := json.Unmarshal([]byte(line), &head); err != nil {
				t.Fatalf("parliament printed %q: %v", line, err)
			}
			t.Logf("parliament %s", head.Version)
			if head.Sids != head.Statements {
				t.Fatalf("%d statements, %d Sids: every statement needs a Sid (findings are named by it)", head.Statements, head.Sids)
			}
			continue
		}
		var f lintFinding
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("parliament printed %q: %v", line, err)
		}
		findings = append(findings, f)
	}
	for _, f := range findings {
		key := [2]string{f.Sid, f.Issue}
		switch {
		case !slices.Contains([]string{"CRITICAL", "HIGH", "MEDIUM", "UNKNOWN"}, f.Severity):
			t.Logf("%s finding in %s: %s %s", f.Severity, f.Sid, f.Issue, f.Detail)
		case justified[key] != "":
			seen[key] = true
		default:
			t.Errorf("statement %s: %s %s: %s", f.Sid, f.Severity, f.Issue, f.Detail)
		}
	}
	for key := range justified {
		if !seen[key] {
			t.Errorf("statement %s: the justified %s finding is no longer reported; remove it from justified and docs/security.md", key[0], key[1])
		}
	}
}
