package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// managerBinary builds instance-manager from main.go once per test
// process and returns its path.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "im-chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "instance-manager")
		cmd := exec.Command("go", "build", "-o", builtBin, ".")
		cmd.Dir = harness.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// controllerKubeconfig writes a kubeconfig for the environment's admin
// impersonating the controller's service account, as the in-process
// harness does.
func controllerKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := environment.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chaos"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["controller"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Impersonate: harness.ControllerUser, ImpersonateGroups: []string{"system:masters", "system:authenticated"}}
	kc.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "controller"}
	kc.CurrentContext = "chaos"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// managerProcess runs the instance-manager binary as the replica of a
// Deployment would: its own process, killed and started again at will.
type managerProcess struct {
	bin, dir   string
	args, env  []string
	healthAddr string
	// webhookAddr is where its webhook server listens (host:port).
	webhookAddr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	logPath string
}

// newManagerProcess prepares a replica serving the environment's webhook
// address, with AWS at awsEndpoint and extra flags.
func newManagerProcess(t *testing.T, awsEndpoint string, extra ...string) *managerProcess {
	t.Helper()
	// The logs stay when the test fails (the path is logged), for a
	// failure to be read after the run.
	dir, err := os.MkdirTemp("", "im-chaos-manager-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	wio := environment.Envtest.WebhookInstallOptions
	m := &managerProcess{bin: managerBinary(t), dir: dir, healthAddr: fmt.Sprintf("127.0.0.1:%d", port),
		webhookAddr: net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))}
	m.args = append([]string{
		"--config-namespace=" + harness.ConfigNamespace,
		"--controller-username=" + harness.ControllerUser,
		"--webhook-host=" + wio.LocalServingHost, "--webhook-port=" + strconv.Itoa(wio.LocalServingPort), "--webhook-cert-dir=" + wio.LocalServingCertDir,
		"--metrics-bind-address=0", "--health-probe-bind-address=" + m.healthAddr,
		"--cluster-name=" + cloud.Cluster, "--aws-region=" + env.AWSRegion,
		"--zap-log-level=info",
	}, extra...)
	m.env = []string{
		"KUBECONFIG=" + controllerKubeconfig(t, dir),
		"AWS_ENDPOINT_URL=" + awsEndpoint, "AWS_REGION=" + env.AWSRegion,
		"AWS_ACCESS_KEY_ID=" + env.AWSAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + env.AWSSecretAccessKey,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
	}
	t.Cleanup(func() { m.kill() })
	return m
}

// newReplica is newManagerProcess for one of several replicas behind a
// serviceProxy: its webhook server listens on a port of its own (the
// proxy listens on the address the webhook configurations name).
func newReplica(t *testing.T, awsEndpoint string, extra ...string) *managerProcess {
	t.Helper()
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	m := newManagerProcess(t, awsEndpoint, append(extra, "--webhook-port="+strconv.Itoa(port))...)
	m.webhookAddr = net.JoinHostPort(environment.Envtest.WebhookInstallOptions.LocalServingHost, strconv.Itoa(port))
	return m
}

// pid is the running process's id, 0 when none runs.
func (m *managerProcess) pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// log returns the current run's log.
func (m *managerProcess) log() string {
	m.mu.Lock()
	path := m.logPath
	m.mu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(data)
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts the process and waits until it is ready (/readyz: the
// webhook server serves).
func (m *managerProcess) start(ctx context.Context) error {
	m.mu.Lock()
	m.starts++
	m.logPath = filepath.Join(m.dir, fmt.Sprintf("manager-%02d.log", m.starts))
	logFile, err := os.Create(m.logPath)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Env = m.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test
	if err := cmd.Start(); err != nil {
		m.mu.Unlock()
		_ = logFile.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()

	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-done:
			return fmt.Errorf("instance-manager exited during start; end of %s:\n%s", m.logPath, tail(m.logPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + m.healthAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("instance-manager not ready within 2m; end of %s:\n%s", m.logPath, tail(m.logPath, 20))
		}
	}
}

// kill sends SIGKILL and waits until the process is gone. It returns the
// pid killed (0 when none ran).
func (m *managerProcess) kill() int {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return 0
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return cmd.Process.Pid
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := splitLines(string(data))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
