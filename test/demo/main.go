// Command demo shows instance-manager end to end on this machine, with
// nothing but `make tools` (which `make demo` runs first):
//
//  1. the local environment (test/env): a real control plane, kwok
//     kubelets, moto as AWS, and the bridge turning instances into Nodes;
//  2. the cluster admin's AWS resources in moto;
//  3. helm install of charts/instance-manager, with the example boundary
//     ConfigMap adapted to those resources;
//  4. the built image (make image) run as one replica of the chart's
//     Deployment, its entrypoint chrooted into the unpacked image as uid
//     65532: the Deployment's arguments, its ServiceAccount's token (so exactly the
//     chart's RBAC), its webhooks served with its own rotated certificate;
//  5. tenants, each a user with a Role in its namespace, submitting short
//     InstanceGroups; the demo prints what they would watch: the group
//     table as it changes, nodes joining with the tenants' labels, Events;
//  6. the admin changing the default image, and every group rolling to it
//     with drains;
//  7. the admin rolling out a broken image (its instances never join) in
//     waves: the rollout halts after the admin's canary group with every
//     tenant's group untouched, a tenant's edit is admitted meanwhile, and
//     the admin rolls the canary back;
//  8. the tenants deleting their groups, and moto checked for leftovers.
//
// It ends with a summary of the timings and exits 0; a step that does not
// happen within its (generous) timeout ends it with exit status 1, the
// reason and the end of the logs. DEMO_KEEP=1 leaves everything running
// after step 7 until Ctrl-C and prints how to use kubectl and the aws CLI
// on it. Flags: -dir (state and logs, default .local/demo), -tenants (1-3),
// -ready-timeout and -rollout-timeout.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/instancemgr/instance-manager/test/env"
)

func main() {
	cfg := config{timeouts: defaultTimeouts(), keep: os.Getenv("DEMO_KEEP") == "1", out: os.Stdout}
	flag.StringVar(&cfg.dir, "dir", ".local/demo", "directory for the run's state and logs (emptied first, kept afterwards)")
	flag.IntVar(&cfg.tenants, "tenants", 3, "how many tenants submit a group (1-3)")
	flag.DurationVar(&cfg.timeouts.ready, "ready-timeout", cfg.timeouts.ready, "how long the tenants' groups (and their apps) may take to become Ready")
	flag.DurationVar(&cfg.timeouts.rollout, "rollout-timeout", cfg.timeouts.rollout, "how long the image rollout may take")
	flag.Parse()
	os.Exit(mainExit(cfg))
}

// mainExit runs the demo and returns the process exit status: 0 done, 1
// failed (reason and log tails printed), 130 interrupted.
func mainExit(cfg config) int {
	out := cfg.out
	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		fmt.Fprintln(out, "demo:", err)
		return 1
	}
	if os.Getenv(env.BinDirEnv) == "" {
		fmt.Fprintf(out, "demo: %v\n(make demo sets it)\n", env.ErrNoEnvironment)
		return 1
	}
	release, err := lock(dir)
	if err != nil {
		fmt.Fprintln(out, "demo:", err)
		return 1
	}
	defer release()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.dir = dir
	_, err = run(ctx, cfg)
	switch {
	case err == nil:
		if cfg.keep {
			fmt.Fprintf(out, "demo stopped; logs are in %s\n", dir)
		} else {
			fmt.Fprintf(out, "\ndemo done; logs are in %s\n", dir)
		}
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(out, "\ndemo interrupted (%v); logs are in %s\n", err, dir)
		return 130
	}
	fmt.Fprintf(out, "\nDEMO FAILED: %v\n", err)
	var f *failure
	if errors.As(err, &f) {
		printLogTails(out, f.logs)
	}
	return 1
}

// lock makes <dir>.pid hold this process's pid, refusing when another
// live demo holds it (two environments cannot share the directory). The
// returned func removes it.
func lock(dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	pidFile := dir + ".pid"
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && pid != os.Getpid() {
			if syscall.Kill(pid, 0) == nil {
				return nil, fmt.Errorf("another demo (pid %d) uses %s; stop it (Ctrl-C in its terminal, or kill %d) or pass -dir", pid, dir, pid)
			}
		}
	}
	if err := os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(pidFile) }, nil
}

// printLogTails prints the last lines of each log file (a directory: each
// .log file in it).
func printLogTails(out io.Writer, paths []string) {
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			continue
		}
		files := []string{p}
		lines := 40
		if info.IsDir() {
			files, _ = filepath.Glob(filepath.Join(p, "*.log"))
			sort.Strings(files)
			lines = 10
		}
		for _, f := range files {
			fmt.Fprintf(out, "\n--- last %d lines of %s ---\n%s", lines, f, tail(f, lines))
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error() + "\n"
	}
	defer func() { _ = f.Close() }()
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > n {
			ring = ring[1:]
		}
	}
	if len(ring) == 0 {
		return "(empty)\n"
	}
	return strings.Join(ring, "\n") + "\n"
}
