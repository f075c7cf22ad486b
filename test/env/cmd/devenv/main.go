// Command devenv runs the full local environment (control plane with
// controller manager and scheduler, kwok, moto and the instance-to-node
// bridge) until SIGTERM or SIGINT. `make dev-up` starts it in the background
// and `make dev-down` stops it.
//
// Once everything is up it writes, in -out (default .local):
//
//	kubeconfig   admin kubeconfig for kubectl
//	aws.env      `export` lines pointing the AWS CLI and SDKs at moto
//	devenv.pids  name=pid of every process it started (for dev-down's check)
//
// and it writes devenv.pid (its own pid) as soon as it starts. On exit it
// stops every process and removes these files. It needs IM_ENV_BIN_DIR and
// IM_ENV_VENV, as `make dev-up` sets them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/instancemgr/instance-manager/test/env"
)

func main() {
	out := flag.String("out", ".local", "directory for kubeconfig, aws.env, devenv.pid, devenv.pids and the environment's state (out/devenv)")
	joinDelay := flag.Duration("join-delay", 5*time.Second, "how long an instance runs before its Node registers")
	poll := flag.Duration("poll", time.Second, "how often the bridge reads moto")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if err := run(*out, *joinDelay, *poll); err != nil {
		log.Printf("devenv: %v", err)
		os.Exit(1)
	}
}

func run(out string, joinDelay, poll time.Duration) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	state := filepath.Join(out, "devenv")
	files := map[string]string{
		"pid":        filepath.Join(out, "devenv.pid"),
		"pids":       filepath.Join(out, "devenv.pids"),
		"kubeconfig": filepath.Join(out, "kubeconfig"),
		"aws.env":    filepath.Join(out, "aws.env"),
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(state); err != nil {
		return fmt.Errorf("clear previous state %s: %w", state, err)
	}
	if err := os.WriteFile(files["pid"], fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	opts := env.AllComponents()
	opts.Dir = state
	opts.JoinDelay = joinDelay
	opts.BridgePollInterval = poll
	opts.Logger = funcr.New(func(prefix, args string) {
		log.Println(strings.TrimSpace(prefix + " " + args))
	}, funcr.Options{Verbosity: 1})

	started := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	e, err := env.New(startCtx, opts)
	cancel()
	if err != nil {
		if errors.Is(err, env.ErrNoEnvironment) {
			return fmt.Errorf("%w (make dev-up sets it)", err)
		}
		return err
	}
	defer func() {
		log.Printf("stopping")
		if err := e.Stop(); err != nil {
			log.Printf("stop: %v", err)
		}
		log.Printf("stopped")
	}()

	kubeconfig, err := os.ReadFile(e.Kubeconfig)
	if err != nil {
		return err
	}
	var pids strings.Builder
	names := make([]string, 0)
	for name := range e.PIDs() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&pids, "%s=%d\n", name, e.PIDs()[name])
	}
	awsEnv := fmt.Sprintf("export AWS_ENDPOINT_URL=%s\nexport AWS_REGION=%s\nexport AWS_DEFAULT_REGION=%s\nexport AWS_ACCESS_KEY_ID=%s\nexport AWS_SECRET_ACCESS_KEY=%s\n",
		e.AWSEndpoint, env.AWSRegion, env.AWSRegion, env.AWSAccessKeyID, env.AWSSecretAccessKey)
	// The kubeconfig last: dev-up waits for it as the sign that all is up.
	for _, f := range []struct{ path, data string }{
		{files["pids"], pids.String()},
		{files["aws.env"], awsEnv},
		{files["kubeconfig"], string(kubeconfig)},
	} {
		if err := writeAtomically(f.path, []byte(f.data)); err != nil {
			return err
		}
	}
	log.Printf("up in %s: apiserver %s, moto %s, logs in %s", time.Since(started).Round(time.Millisecond), e.Config.Host, e.AWSEndpoint, filepath.Join(state, "logs"))
	<-ctx.Done()
	log.Printf("signal received")
	return nil
}

// writeAtomically writes data to a temporary file next to path and renames
// it, so readers never see a partial file.
func writeAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
