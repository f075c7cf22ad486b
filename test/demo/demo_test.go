package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/test/env"
)

// Each demo run is a process of its own, as `make demo` runs it: the test
// binary re-executes itself with demoArgsEnv set, and TestMain then runs
// main with those arguments. (One process cannot run two: the manager's
// certificate rotator registers a controller name that must be unique per
// process.)
const demoArgsEnv = "IM_DEMO_TEST_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(demoArgsEnv); ok {
		os.Args = append([]string{"demo"}, strings.Fields(args)...)
		flag.CommandLine = flag.NewFlagSet("demo", flag.ExitOnError)
		main()
		return
	}
	os.Exit(m.Run())
}

// runDemo runs the demo program with args and returns its output and exit
// status; it fails t if the program does not end within 20 minutes.
func runDemo(t *testing.T, args ...string) (string, int) {
	t.Helper()
	if os.Getenv(env.BinDirEnv) == "" {
		t.Skip("needs the local environment: run make test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), demoArgsEnv+"="+strings.Join(args, " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case ctx.Err() != nil:
		t.Fatalf("the demo did not end within 20m; its output:\n%s", out.String())
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("running the demo: %v\n%s", err, out.String())
	return "", 0
}

// TestDemo runs the demo's whole story with two tenants (make demo has
// three) and checks that it tells it and ends well.
func TestDemo(t *testing.T) {
	out, code := runDemo(t, "-dir", filepath.Join(t.TempDir(), "demo"), "-tenants", "2")
	t.Log("demo output:\n" + out)
	if code != 0 {
		t.Fatalf("the demo exited %d, want 0", code)
	}
	for _, want := range []string{
		"=== [1/8]", "STATUS: deployed", "the mutating webhook added the admin's defaults", "spec.eks.configuration.image: ",
		"kubectl get ig -A", "Upgrading", "Ready,SchedulingDisabled", "NodeDrained", "Deleted (instance gone)",
		"RolloutHalted", "halted: platform-canary/canary", "admitted during the halted rollout", "RolloutRolledBack", "rolled back: the canary runs",
		"-> 0 groups", "nothing left in AWS", "=== Summary", "demo done",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// The summary's rollout line: every group rolled, each of its nodes
	// drained and replaced, the apps' PodDisruptionBudgets kept.
	m := regexp.MustCompile(`(\d+) groups, (\d+) nodes replaced, (\d+) drains, app pods >= (\d+)/2 throughout`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the summary has no rollout line")
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if n(1) != 2 || n(2) < 4 || n(3) < 4 || n(4) < 1 {
		t.Errorf("rollout: %s; want 2 groups, their 4 nodes drained and replaced, at least 1 app pod of 2 available", m[0])
	}
	for _, tenant := range []string{"team-a", "team-b"} {
		if !regexp.MustCompile(`create -> Ready \(with app\)\s.*` + tenant + ` \d`).MatchString(out) {
			t.Errorf("the summary has no time to Ready for %s", tenant)
		}
	}
}

// TestDemoFailsLoudly gives the tenants' groups no time to become Ready:
// the demo must exit 1 naming the step and what did not happen, with the
// end of the manager's and the components' logs.
func TestDemoFailsLoudly(t *testing.T) {
	out, code := runDemo(t, "-dir", filepath.Join(t.TempDir(), "demo"), "-tenants", "1", "-ready-timeout", "1ms")
	if code != 1 {
		t.Fatalf("the demo exited %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{
		`DEMO FAILED: step "Tenants submit`, "did not happen within 1ms", "last table:", "kube-apiserver.log ---",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure output lacks %q:\n%s", want, out)
		}
	}
	_, managerTail, _ := strings.Cut(out, "manager.log ---\n")
	managerTail, _, _ = strings.Cut(managerTail, "--- last ")
	if !strings.Contains(managerTail, "\tINFO\t") {
		t.Errorf("the failure output lacks the manager's log:\n%s", out)
	}
}

// TestLockRefusesASecondDemo checks that a directory in use by a live
// demo is refused, and a stale pid file is taken over.
func TestLockRefusesASecondDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	// A live process that is not this one: the parent (go test).
	if err := os.WriteFile(dir+".pid", fmt.Appendf(nil, "%d\n", os.Getppid()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lock(dir); err == nil || !strings.Contains(err.Error(), "another demo") {
		t.Errorf("lock with a live owner: %v, want refused", err)
	}
	// A pid that cannot be running.
	if err := os.WriteFile(dir+".pid", []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	release, err := lock(dir)
	if err != nil {
		t.Fatalf("lock with a stale owner: %v", err)
	}
	b, _ := os.ReadFile(dir + ".pid")
	if strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("pid file holds %q, want this process", b)
	}
	release()
	if _, err := os.Stat(dir + ".pid"); !os.IsNotExist(err) {
		t.Errorf("release left the pid file: %v", err)
	}
}

// TestClearDirRefusesForeignDirectories checks that -dir is emptied only
// when it holds an earlier run.
func TestClearDirRefusesForeignDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := clearDir(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := clearDir(dir); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("a directory of other files: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Errorf("the other files are gone: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environment.log"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := clearDir(dir); err != nil {
		t.Errorf("an earlier run's directory: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("an earlier run's directory is still there: %v", err)
	}
}
