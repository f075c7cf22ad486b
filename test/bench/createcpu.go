package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const userHZ = 100

// createCPU is the CPU time, per create, of each process taking part in
// creating objects of one kind.
type createCPU struct {
	apiserver, etcd, self time.Duration
	// took is how long the creates took (wall clock).
	took time.Duration
}

func (c createCPU) total() time.Duration { return c.apiserver + c.etcd + c.self }

// cpuPerCreate has `clients` workers create n objects of kind gvk in ns
// (named prefix-0 .. prefix-(n-1)) and returns the CPU time (user +
// system) of the apiserver and etcd processes (pids, from
// /proc/<pid>/stat) and of this process (getrusage: the clients, and the
// manager's webhooks when gvk is an InstanceGroup) over those n creates.
// When profile is not nil, an apiserver CPU profile of profileFor from the
// start of the run is written to it (GET /debug/pprof/profile through
// admin; the apiserver needs --profiling).
func cpuPerCreate(ctx context.Context, c client.Client, admin *rest.Config, pids map[string]int, gvk schema.GroupVersionKind, ns, prefix string, clients, n int, profile io.Writer, profileFor time.Duration) (createCPU, error) {
	before, err := cpuOf(pids)
	if err != nil {
		return createCPU{}, err
	}
	began := time.Now()
	profiled := make(chan error, 1)
	if profile != nil {
		go func() { profiled <- fetchAPIServerProfile(ctx, admin, profile, profileFor) }()
	} else {
		profiled <- nil
	}
	err = parallel(ctx, clients, n, func(i int) error {
		obj := shortGroup(gvk, ns, fmt.Sprintf("%s-%d", prefix, i), "")
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", gvk.Kind, ns, obj.GetName(), err)
		}
		return nil
	})
	took := time.Since(began)
	after, cerr := cpuOf(pids)
	if perr := <-profiled; err == nil {
		err = perr
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		return createCPU{}, err
	}
	per := func(a, b time.Duration) time.Duration { return (b - a) / time.Duration(n) }
	return createCPU{
		apiserver: per(before.apiserver, after.apiserver),
		etcd:      per(before.etcd, after.etcd),
		self:      per(before.self, after.self),
		took:      took,
	}, nil
}

// cpuOf reads the CPU time used so far by the apiserver, etcd and this
// process.
func cpuOf(pids map[string]int) (createCPU, error) {
	api, err := pidCPU(pids["kube-apiserver"])
	if err != nil {
		return createCPU{}, fmt.Errorf("kube-apiserver: %w", err)
	}
	etcd, err := pidCPU(pids["etcd"])
	if err != nil {
		return createCPU{}, fmt.Errorf("etcd: %w", err)
	}
	return createCPU{apiserver: api, etcd: etcd, self: processCPU()}, nil
}

// pidCPU is utime + stime of pid (fields 14 and 15 of /proc/<pid>/stat,
// in USER_HZ ticks).
func pidCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no such process in the environment")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing one.
	_, rest, ok := strings.Cut(string(raw), ") ")
	if !ok {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, raw)
	}
	f := strings.Fields(rest) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, raw)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// fetchAPIServerProfile writes a CPU profile of the apiserver over d to w.
func fetchAPIServerProfile(ctx context.Context, admin *rest.Config, w io.Writer, d time.Duration) error {
	hc, err := rest.HTTPClientFor(admin)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(admin.Host, "/"), int(d.Seconds()))
	if err := download(ctx, hc, url, w); err != nil {
		return fmt.Errorf("apiserver CPU profile: %w", err)
	}
	return nil
}

// cpuCreates is how many objects of each kind createCPUFigures creates.
var cpuCreates = envInt("BENCH_CPU_CREATES", 2000)

// profileWindow is how long each API server CPU profile runs.
const profileWindow = 20 * time.Second

// createCPUFigures reports (names ending in suffix) the CPU time per create of the API server, etcd
// and the webhooks, with 50 clients creating cpuCreates PlainGroups and
// then as many InstanceGroups in ns (one kind at a time, so that each process's
// CPU time belongs to one kind), and the ratio of the total: with the API
// server CPU-bound, the create latency ratio follows it. When profilePath
// is not empty, an API server CPU profile of the InstanceGroup creates is
// written there, and one of the PlainGroup creates to profilePath.plain.
func createCPUFigures(ctx context.Context, c client.Client, e *env.Environment, ns, suffix string, report func(string, float64, string), profilePath string) error {
	const clients = 50
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	pids := e.PIDs()
	// Each kind's profile covers all of its creates (they take a few
	// seconds), so that the two profiles are of the same number of
	// creates: go tool pprof -diff_base <path>.plain <path> shows what the
	// webhooks cost the API server.
	run := func(gvk schema.GroupVersionKind, prefix, path string) (createCPU, error) {
		var profile io.Writer
		if path != "" {
			f, err := os.Create(path)
			if err != nil {
				return createCPU{}, err
			}
			defer f.Close()
			profile = f
		}
		cpu, err := cpuPerCreate(ctx, c, e.Config, pids, gvk, ns, prefix, clients, cpuCreates, profile, profileWindow)
		if err == nil && path != "" && cpu.took > profileWindow {
			err = fmt.Errorf("%d %ss took %s, longer than the profile's %s: lower BENCH_CPU_CREATES", cpuCreates, gvk.Kind, cpu.took, profileWindow)
		}
		return cpu, err
	}
	plainPath := ""
	if profilePath != "" {
		plainPath = profilePath + ".plain"
	}
	plain, err := run(plainGroup, "p", plainPath)
	if err != nil {
		return err
	}
	ours, err := run(v1alpha1.GroupVersion.WithKind("InstanceGroup"), "g", profilePath)
	if err != nil {
		return err
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	report("create_cpu_ms_apiserver"+suffix, ms(ours.apiserver), "ms")
	report("create_cpu_ms_apiserver_plain"+suffix, ms(plain.apiserver), "ms")
	report("create_cpu_ms_etcd"+suffix, ms(ours.etcd), "ms")
	report("create_cpu_ms_etcd_plain"+suffix, ms(plain.etcd), "ms")
	// The clients' share of this process is the same for both kinds.
	report("create_cpu_ms_webhooks"+suffix, ms(ours.self-plain.self), "ms")
	report("create_cpu_ratio"+suffix, ours.total().Seconds()/plain.total().Seconds(), "ratio")
	report("create_seconds_cpu_phase"+suffix, ours.took.Seconds(), "s")
	report("create_seconds_cpu_phase_plain"+suffix, plain.took.Seconds(), "s")
	return nil
}
