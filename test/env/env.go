// Package env runs the project's local environment: a real Kubernetes control
// plane (etcd, kube-apiserver and optionally kube-controller-manager and
// kube-scheduler), kwok as the kubelets of fake nodes, moto as AWS, and a
// bridge that turns the EC2 instances of moto's Auto Scaling groups into
// Nodes. Everything runs as child processes on 127.0.0.1 in a scratch
// directory and dies with the process that started it.
//
// Tests call Start; programs (the dev environment, demos) call New and Stop.
// The tools come from the directories named by IM_ENV_BIN_DIR (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and
// IM_ENV_VENV (bin/moto_server), which `make test` sets after `make tools`.
package env

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Environment variables naming where the tools are.
const (
	// BinDirEnv names the directory holding etcd, kube-apiserver,
	// kube-controller-manager, kube-scheduler and kwok (`make tools` builds
	// them into bin/).
	BinDirEnv = "IM_ENV_BIN_DIR"
	// VenvEnv names the Python virtualenv holding bin/moto_server.
	VenvEnv = "IM_ENV_VENV"
)

// ErrNoEnvironment is returned by New when IM_ENV_BIN_DIR is not set: the
// caller is not running under `make test` (or `make dev-up`).
var ErrNoEnvironment = errors.New(BinDirEnv + " is not set: run `make test` (or `make tools` and set " +
	BinDirEnv + "=<repo>/bin " + VenvEnv + "=<repo>/.venv)")

// Options chooses what the environment runs beyond etcd and kube-apiserver,
// which always run. The zero value is the cheapest environment (control plane
// storage and API only), enough for webhook tests.
type Options struct {
	// CRDDirectoryPaths are directories (or files) of CustomResourceDefinition
	// YAML installed, and waited for, before New returns.
	CRDDirectoryPaths []string
	// WebhookInstallOptions is passed to envtest: the Mutating- and
	// ValidatingWebhookConfigurations in it are installed pointing at
	// LocalServingHost:LocalServingPort with a CA for the certificates envtest
	// writes to LocalServingCertDir. Read those fields back from
	// Environment.Envtest.WebhookInstallOptions to start the webhook server.
	WebhookInstallOptions envtest.WebhookInstallOptions

	// ControllerManager runs kube-controller-manager (Deployments,
	// ReplicaSets, DaemonSets, Jobs, PodDisruptionBudget status, garbage
	// collection, namespace deletion, node lifecycle, service account tokens).
	ControllerManager bool
	// Scheduler runs kube-scheduler.
	Scheduler bool
	// Kwok runs kwok: Nodes annotated KwokAnnotation become Ready and their
	// Pods run. The apiserver taints every new Node
	// node.kubernetes.io/not-ready:NoSchedule; only the controller manager's
	// node lifecycle controller removes it, so run both.
	Kwok bool
	// AWS runs moto; Environment.AWS points at it.
	AWS bool
	// MotoAutoScaling chooses the Auto Scaling behaviours moto gets from
	// test/env (see MotoAutoScalingEnv); empty takes the test process's
	// IM_MOTO_AUTOSCALING, else DefaultMotoAutoScaling.
	MotoAutoScaling string
	// Bridge turns running instances of moto's Auto Scaling groups into Nodes
	// and removes them when the instances go. Implies Kwok, AWS and
	// ControllerManager (see Kwok).
	Bridge bool

	// JoinDelay is how long an instance must have been running, as seen by
	// the bridge, before its Node is registered. 0 registers on the first poll.
	JoinDelay time.Duration
	// BridgePollInterval is how often the bridge reads moto. Default 1s.
	BridgePollInterval time.Duration

	// APIServerProfiling serves the apiserver's /debug/pprof endpoints (to
	// admin), for benchmarks that profile it. Off by default, as on a
	// hardened control plane.
	APIServerProfiling bool

	// Dir, when set, holds the environment's state and logs and is kept after
	// Stop (it must not be in use by another environment). When empty a
	// temporary directory is used and removed by Stop.
	Dir string
	// Logger receives what the environment and the bridge do. Start logs to
	// the test; New discards when it is the zero Logger.
	Logger logr.Logger
}

// AllComponents returns Options with every component on: the control plane
// with controller manager and scheduler, kwok, moto and the bridge.
func AllComponents() Options {
	return Options{ControllerManager: true, Scheduler: true, Kwok: true, AWS: true, Bridge: true}
}

// Environment is a running local environment. Its fields are valid until
// Stop.
type Environment struct {
	// Config is an admin (system:masters) client configuration for the
	// apiserver. Use rest.CopyConfig and set Impersonate to act as a limited
	// user; the apiserver authorizes with RBAC only.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the admin user (embedded
	// credentials; works with kubectl).
	Kubeconfig string
	// AWS is configured for moto: region us-west-2, static dummy credentials,
	// BaseEndpoint = AWSEndpoint. Zero when Options.AWS is off.
	AWS aws.Config
	// AWSEndpoint is moto's URL (http://127.0.0.1:<port>); empty without AWS.
	AWSEndpoint string
	// Envtest installed the CRDs and webhook configurations into this
	// environment (it does not run the processes). Its WebhookInstallOptions
	// carry LocalServingHost, LocalServingPort and LocalServingCertDir.
	Envtest *envtest.Environment
	// Bridge is the instance-to-node bridge; nil unless Options.Bridge.
	Bridge *Bridge
	// Dir is the directory with the environment's state; logs are in Dir/logs.
	Dir string

	opts    Options
	log     logr.Logger
	ownDir  bool
	procs   []*process // in start order
	closers []func()   // in-process servers (AWSRecorder), closed by Stop
	procsMu sync.Mutex

	bridgeCancel context.CancelFunc
	bridgeDone   chan struct{}
	stopOnce     sync.Once
	stopErr      error
}

// tools are the paths of the binaries an environment needs.
type tools struct {
	etcd, apiserver, controllerManager, scheduler, kwok, moto string
}

// findTools resolves the binaries opts needs from IM_ENV_BIN_DIR and
// IM_ENV_VENV. It returns ErrNoEnvironment when IM_ENV_BIN_DIR is unset and an
// error naming the missing file otherwise.
func findTools(opts Options) (tools, error) {
	binDir := os.Getenv(BinDirEnv)
	if binDir == "" {
		return tools{}, ErrNoEnvironment
	}
	t := tools{
		etcd:              filepath.Join(binDir, "etcd"),
		apiserver:         filepath.Join(binDir, "kube-apiserver"),
		controllerManager: filepath.Join(binDir, "kube-controller-manager"),
		scheduler:         filepath.Join(binDir, "kube-scheduler"),
		kwok:              filepath.Join(binDir, "kwok"),
	}
	need := []string{t.etcd, t.apiserver}
	if opts.ControllerManager {
		need = append(need, t.controllerManager)
	}
	if opts.Scheduler {
		need = append(need, t.scheduler)
	}
	if opts.Kwok {
		need = append(need, t.kwok)
	}
	if opts.AWS {
		venv := os.Getenv(VenvEnv)
		if venv == "" {
			return tools{}, fmt.Errorf("%s is not set but the environment needs moto: set it to the virtualenv `make tools` creates (<repo>/.venv)", VenvEnv)
		}
		t.moto = filepath.Join(venv, "bin", "moto_server")
		need = append(need, t.moto)
	}
	for _, path := range need {
		info, err := os.Stat(path)
		if err != nil {
			return tools{}, fmt.Errorf("%s is missing (%v): run `make tools`", path, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return tools{}, fmt.Errorf("%s is not an executable file: run `make tools`", path)
		}
	}
	return t, nil
}

// Start starts an environment for the test t and stops it in t.Cleanup. It
// skips t when IM_ENV_BIN_DIR is unset (the unit tier) and fails t, naming
// the file, when a tool is missing or the environment does not come up. The
// environment logs to t; when t has failed, Stop first logs the end of each
// process's log.
func Start(t testing.TB, opts Options) *Environment {
	t.Helper()
	if os.Getenv(BinDirEnv) == "" {
		t.Skip("needs the local environment: run make test")
	}
	normalize(&opts)
	if _, err := findTools(opts); err != nil {
		t.Fatalf("local environment: %v", err)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()
	e, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("local environment: %v", err)
	}
	t.Logf("local environment up in %s (dir %s)", time.Since(started).Round(time.Millisecond), e.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			e.logTails(t, 30)
		}
		if err := e.Stop(); err != nil {
			t.Errorf("stop local environment: %v", err)
		}
	})
	return e
}

func normalize(opts *Options) {
	if opts.Bridge {
		opts.Kwok = true
		opts.AWS = true
		opts.ControllerManager = true
	}
	if opts.BridgePollInterval <= 0 {
		opts.BridgePollInterval = time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
}

// New starts an environment. ctx bounds the start only; the environment runs
// until Stop. It returns ErrNoEnvironment when IM_ENV_BIN_DIR is unset, an
// error naming a missing tool, or an error with the end of the log of the
// process that failed to come up (after stopping what it had started).
func New(ctx context.Context, opts Options) (*Environment, error) {
	normalize(&opts)
	bins, err := findTools(opts)
	if err != nil {
		return nil, err
	}
	e := &Environment{opts: opts, log: opts.Logger, Dir: opts.Dir}
	if e.Dir == "" {
		sweepStaleDirs()
		e.Dir, err = os.MkdirTemp("", scratchPrefix)
		if err != nil {
			return nil, fmt.Errorf("create scratch directory: %w", err)
		}
		e.ownDir = true
		if err := os.WriteFile(filepath.Join(e.Dir, ownerFile), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
			_ = os.RemoveAll(e.Dir)
			return nil, fmt.Errorf("write %s: %w", ownerFile, err)
		}
	}
	if err := e.start(ctx, bins); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// Scratch directories are <TMPDIR>/im-env-*; ownerFile in each holds the pid
// of the process that made it.
const (
	scratchPrefix = "im-env-"
	ownerFile     = "owner.pid"
)

// sweepStaleDirs removes the scratch directories of environments whose
// process died without Stop (SIGKILL, a crash): their child processes died
// with them, but the directory stayed. Best effort; errors are ignored.
func sweepStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), scratchPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created right now, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// addProc records a process that is ready, so that Stop stops it.
func (e *Environment) addProc(p *process, began time.Time) {
	e.procsMu.Lock()
	defer e.procsMu.Unlock()
	e.procs = append(e.procs, p)
	e.log.V(1).Info("ready", "process", p.name, "pid", p.pid(), "after", time.Since(began).Round(time.Millisecond).String(), "log", p.logPath)
}

func (e *Environment) start(ctx context.Context, bins tools) error {
	opts := e.opts
	logDir := filepath.Join(e.Dir, "logs")
	pkiDir := filepath.Join(e.Dir, "pki")
	for _, d := range []string{logDir, pkiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}

	// Credentials: one CA signs the serving certificate and every client.
	ca, err := newCertAuthority("instance-manager-test-ca")
	if err != nil {
		return err
	}
	serving, err := ca.servingCert(loopbackIPs(), []string{"localhost"})
	if err != nil {
		return err
	}
	files := apiserverFiles{caCert: filepath.Join(pkiDir, "ca.crt")}
	if err := os.WriteFile(files.caCert, ca.certPEM, 0o600); err != nil {
		return err
	}
	if files.servingCert, files.servingKey, err = serving.write(pkiDir, "apiserver"); err != nil {
		return err
	}
	if files.saPrivate, files.saPublic, err = newServiceAccountKey(pkiDir); err != nil {
		return err
	}
	frontProxyCA, err := newCertAuthority("instance-manager-test-front-proxy-ca")
	if err != nil {
		return err
	}
	files.frontProxyCACert = filepath.Join(pkiDir, "front-proxy-ca.crt")
	if err := os.WriteFile(files.frontProxyCACert, frontProxyCA.certPEM, 0o600); err != nil {
		return err
	}
	proxyClient, err := frontProxyCA.clientCert(frontProxyClient)
	if err != nil {
		return err
	}
	if files.proxyClientCert, files.proxyClientKey, err = proxyClient.write(pkiDir, "front-proxy-client"); err != nil {
		return err
	}
	users := map[string]keyPair{}
	for _, user := range []string{"admin", "system:kube-controller-manager", "system:kube-scheduler", "kwok"} {
		// Every component is a cluster admin: the point is a working
		// cluster, not a model of component RBAC.
		kp, err := ca.clientCert(user, "system:masters")
		if err != nil {
			return err
		}
		users[user] = kp
	}

	// moto starts alongside the control plane; only the bridge needs it.
	// Every return waits for it, so that Stop knows its process.
	motoCtx, cancelMoto := context.WithCancel(ctx)
	motoDone := make(chan struct{})
	var motoErr error
	go func() {
		defer close(motoDone)
		if !opts.AWS {
			return
		}
		began := time.Now()
		p, url, err := startMoto(motoCtx, bins.moto, logDir, opts.MotoAutoScaling)
		if err != nil {
			motoErr = err
			return
		}
		e.addProc(p, began)
		e.AWSEndpoint = url
		e.AWS = newAWSConfig(url, e.log.WithName("aws"))
	}()
	defer func() {
		cancelMoto()
		<-motoDone
	}()

	began := time.Now()
	p, etcdURL, err := startEtcd(ctx, bins.etcd, e.Dir, logDir)
	if err != nil {
		return err
	}
	e.addProc(p, began)

	admin := clientConfig("", ca.certPEM, users["admin"])
	began = time.Now()
	p, apiURL, err := startAPIServer(ctx, bins.apiserver, files, etcdURL, logDir, admin, e.opts.APIServerProfiling)
	if err != nil {
		return err
	}
	e.addProc(p, began)
	admin.Host = apiURL
	e.Config = admin
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if err := writeKubeconfig(e.Kubeconfig, "admin", admin); err != nil {
		return err
	}
	componentKubeconfig := func(user string) (string, error) {
		path := filepath.Join(pkiDir, filepath.Base(user)+".kubeconfig")
		return path, writeKubeconfig(path, user, clientConfig(apiURL, ca.certPEM, users[user]))
	}

	g, gctx := errgroup.WithContext(ctx)
	began = time.Now()
	if opts.ControllerManager {
		kc, err := componentKubeconfig("system:kube-controller-manager")
		if err != nil {
			return err
		}
		g.Go(func() error {
			p, err := startControllerManager(gctx, bins.controllerManager, kc, files.caCert, files.saPrivate, e.Dir, logDir)
			if err != nil {
				return err
			}
			e.addProc(p, began)
			return nil
		})
	}
	if opts.Scheduler {
		kc, err := componentKubeconfig("system:kube-scheduler")
		if err != nil {
			return err
		}
		g.Go(func() error {
			p, err := startScheduler(gctx, bins.scheduler, kc, e.Dir, logDir)
			if err != nil {
				return err
			}
			e.addProc(p, began)
			return nil
		})
	}
	if opts.Kwok {
		kc, err := componentKubeconfig("kwok")
		if err != nil {
			return err
		}
		g.Go(func() error {
			p, err := startKwok(gctx, bins.kwok, kc, e.Dir, logDir)
			if err != nil {
				return err
			}
			e.addProc(p, began)
			return nil
		})
	}
	// envtest installs CRDs and webhook configurations into the running
	// apiserver; it starts no process of its own.
	if wio := &opts.WebhookInstallOptions; wio.LocalServingPort == 0 && len(wio.MutatingWebhooks)+len(wio.ValidatingWebhooks) > 0 {
		// A webhook server is started (and restarted) on this port for
		// the whole test; see listenPort.
		port, err := listenPort()
		if err != nil {
			return err
		}
		wio.LocalServingHost, wio.LocalServingPort = cmp.Or(wio.LocalServingHost, "127.0.0.1"), port
	}
	e.Envtest = &envtest.Environment{
		UseExistingCluster:    ptr.To(true),
		Config:                rest.CopyConfig(admin),
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: len(opts.CRDDirectoryPaths) > 0,
		WebhookInstallOptions: opts.WebhookInstallOptions,
	}
	g.Go(func() error {
		if _, err := e.Envtest.Start(); err != nil {
			return fmt.Errorf("install CRDs and webhooks with envtest: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	<-motoDone
	if motoErr != nil {
		return motoErr
	}

	if opts.Bridge {
		b, err := NewBridge(e.Config, e.AWS, BridgeOptions{
			JoinDelay:    opts.JoinDelay,
			PollInterval: opts.BridgePollInterval,
			Logger:       e.log.WithName("bridge"),
		})
		if err != nil {
			return err
		}
		e.Bridge = b
		bctx, cancel := context.WithCancel(context.Background())
		e.bridgeCancel = cancel
		e.bridgeDone = make(chan struct{})
		go func() {
			defer close(e.bridgeDone)
			b.Run(bctx)
		}()
	}
	return nil
}

// ResetAWS makes moto forget every resource (POST /moto-api/reset). With the
// bridge running it then removes the Nodes of the instances that are gone
// before returning, so the next test starts without them. moto rebuilds its
// defaults (default VPC and subnets, AMIs) lazily: the first EC2 call after a
// reset takes a few seconds; with the bridge, that call is made here.
func (e *Environment) ResetAWS(ctx context.Context) error {
	if e.AWSEndpoint == "" {
		return errors.New("ResetAWS: the environment runs without AWS; start it with Options.AWS or Options.Bridge")
	}
	if err := resetMoto(ctx, e.AWSEndpoint); err != nil {
		return err
	}
	if e.Bridge != nil {
		if err := e.Bridge.Sync(ctx); err != nil {
			return fmt.Errorf("ResetAWS: remove nodes of reset instances: %w", err)
		}
	}
	return nil
}

// Stop stops the bridge and every process (SIGTERM, then SIGKILL after a
// grace period) in reverse start order and removes the scratch directory
// unless Options.Dir was given. Safe to call more than once; later calls
// return the first result.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		if e.bridgeCancel != nil {
			e.bridgeCancel()
			<-e.bridgeDone
		}
		var errs []error
		if e.Envtest != nil {
			// Removes only envtest's webhook certificate directory.
			if err := e.Envtest.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("envtest cleanup: %w", err))
			}
		}
		e.procsMu.Lock()
		procs := slices.Clone(e.procs)
		closers := slices.Clone(e.closers)
		e.procsMu.Unlock()
		for _, c := range closers {
			c()
		}
		slices.Reverse(procs)
		for _, p := range procs {
			// Reverse start order: the apiserver stops while etcd still answers.
			p.stop(5 * time.Second)
		}
		if e.ownDir {
			if err := os.RemoveAll(e.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.Dir, err))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// PIDs returns the process ids of the environment's processes, by name.
func (e *Environment) PIDs() map[string]int {
	e.procsMu.Lock()
	defer e.procsMu.Unlock()
	pids := make(map[string]int, len(e.procs))
	for _, p := range e.procs {
		pids[p.name] = p.pid()
	}
	return pids
}

// logTails logs the last n lines of every process log to t.
func (e *Environment) logTails(t testing.TB, n int) {
	e.procsMu.Lock()
	defer e.procsMu.Unlock()
	for _, p := range e.procs {
		t.Logf("--- last %d lines of %s ---\n%s", n, p.logPath, tailFile(p.logPath, n))
	}
}
