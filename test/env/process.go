package env

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process of the environment. It runs in its own process
// group (so a signal to the group also reaches anything it forks) and gets
// SIGKILL from the kernel when the thread that started it dies, so nothing
// outlives a test binary that is killed, panics or times out.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // valid after exited is closed

	stopOnce sync.Once
}

// startProcess starts bin with args, logging stdout and stderr to
// <logDir>/<name>.log. extraEnv entries (KEY=value) are added to the
// environment of the test binary.
func startProcess(name, bin string, args []string, logDir string, extraEnv ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log file for %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "+ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid returns the process id (also its process group id).
func (p *process) pid() int { return p.cmd.Process.Pid }

// hasExited reports whether the process is gone.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace for the process
// to exit, then SIGKILLs the group and waits. Safe to call more than once.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		// Signal the group only while its leader has not been reaped, so the
		// id cannot have been reused by a process that is not ours.
		pgid := p.pid()
		if !p.hasExited() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(grace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-p.exited
			}
		}
		_ = p.logFile.Close()
	})
}

// describeExit explains why a process that should be running is not, with the
// end of its log.
func (p *process) describeExit() string {
	return fmt.Sprintf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tailFile(p.logPath, 25))
}

// waitReady polls check every 100ms until it returns nil, the process exits,
// ctx ends or timeout passes. The error carries the last check error and the
// log tail.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w: %s", errEarlyExit, p.describeExit())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last check: %v); last lines of %s:\n%s",
				p.name, timeout, last, p.logPath, tailFile(p.logPath, 25))
		case <-tick.C:
		}
	}
}

// errEarlyExit marks a process that died before it became ready; the usual
// cause is a port taken between choosing it and binding it, so such starts are
// retried with new ports.
var errEarlyExit = errors.New("process exited before it was ready")

// startWithRetry calls start up to three times while it fails with
// errEarlyExit.
func startWithRetry[T any](start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		v, err = start()
		if err == nil || !errors.Is(err, errEarlyExit) {
			return v, err
		}
	}
	return v, err
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// listenPort returns a TCP port on 127.0.0.1, free a moment ago, for a
// server that a test stops and starts again on the same port (the
// webhook server of a restarted manager). Ports from freePorts are in the
// kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
// 32768-60999 by default), which the kernel also hands to outgoing
// connections: between a stop and the restart, any client of any process
// on the machine can take the port ("bind: address already in use").
// listenPort picks below that range instead, where only another
// listenPort can collide, and checks that the port is free.
func listenPort() (int, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const from = 10000 // above the well-known and registered ports most services use
	if low <= from+1000 {
		return freePort() // an unusual range: take what the kernel gives
	}
	for range 100 {
		port := from + rand.IntN(low-from)
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free TCP port on 127.0.0.1 between %d and %d after 100 tries", from, low)
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// tailFile returns the last n lines of the file at path (or why it cannot).
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
