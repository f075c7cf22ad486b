package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/build/image"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/test/install"
)

// Sizes of the memory figure.
var (
	rssGroups = envInt("BENCH_RSS_GROUPS", 2000)
	rssNodes  = envInt("BENCH_RSS_NODES", 10000)
)

// benchRSS measures the peak resident memory (VmHWM) of the manager, built
// and run in a process of its own against the local control plane and
// moto, holding rssGroups InstanceGroups and rssNodes Nodes (rssNodes /
// rssGroups labelled for each group) in its caches, once every group has
// been reconciled. The groups name an EKS cluster moto does not have, so
// each is reconciled to an InvalidSpec error rather than building
// rssGroups Auto Scaling groups and rssNodes instances in moto (which would
// not fit in make bench's time); the figure is the manager's caches and
// per-group state.
//
// heapProfile, when not empty, is where a heap profile of the manager is
// written then (from its --pprof-bind-address).
func benchRSS(report func(string, float64, string), heapProfile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e, err := env.New(ctx, env.Options{AWS: true, CRDDirectoryPaths: []string{harness.CRDPath()}, WebhookInstallOptions: harness.WebhookOptions()})
	if errors.Is(err, env.ErrNoEnvironment) {
		return errNoEnvironment
	}
	if err != nil {
		return fmt.Errorf("local environment: %w", err)
	}
	defer func() { _ = e.Stop() }()
	admin, err := client.New(e.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		return err
	}
	if err := harness.EnsureConfigNamespace(ctx, admin); err != nil {
		return err
	}
	// The binary the image ships (static, stripped), for this machine.
	bin := filepath.Join(e.Dir, "instance-manager")
	meta, err := image.DefaultMetadata(harness.RepoRoot())
	if err != nil {
		return err
	}
	if err := image.Compile(ctx, image.Options{Metadata: meta, RepoDir: harness.RepoRoot()},
		v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, bin); err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	wio := e.Envtest.WebhookInstallOptions
	pprofAddr := "0"
	if heapProfile != "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		pprofAddr = l.Addr().String()
		_ = l.Close()
	}
	cmd := exec.CommandContext(ctx, bin,
		"--config-namespace="+harness.ConfigNamespace, "--controller-username=admin", "--installation-id=bench",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--cloud-checks=false",
		"--webhook-host="+wio.LocalServingHost, "--webhook-port="+strconv.Itoa(wio.LocalServingPort), "--webhook-cert-dir="+wio.LocalServingCertDir,
		"--zap-log-level=error", "--pprof-bind-address="+pprofAddr)
	cmd.Dir = harness.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "AWS_ENDPOINT_URL="+e.AWSEndpoint, "AWS_REGION=us-west-2",
		"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", "AWS_EC2_METADATA_DISABLED=true")
	logFile, err := os.Create(filepath.Join(e.Dir, "logs", "manager.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	cloud, err := install.NewCloud(ctx, e.AWS)
	if err != nil {
		return err
	}
	data, err := cloud.Boundaries(cloud.AMIs[0])
	if err != nil {
		return err
	}
	// The defaults name a cluster moto does not have (see above).
	data["defaults"] = strings.Replace(data["defaults"], "clusterName: "+cloud.Cluster, "clusterName: bench-absent", 1)
	atScale(data)
	if err := harness.SetBoundaries(ctx, admin, data); err != nil {
		return fmt.Errorf("the manager did not load the boundaries (log: %s): %w", logFile.Name(), err)
	}

	const ns = "bench-rss"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	perGroup := max(rssNodes/rssGroups, 1)
	if err := parallel(ctx, 50, rssNodes, func(i int) error {
		g := i / perGroup % rssGroups
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/65536, i/256%256, i%256), Labels: map[string]string{
				v1alpha1.LabelInstanceGroup: fmt.Sprintf("group-%d", g), v1alpha1.LabelInstanceGroupNamespace: ns,
				"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "t2.small",
				"topology.kubernetes.io/zone": "us-west-2a", "a-default-label": "true", "test-label": "true",
			}},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///us-west-2a/i-%017x", i),
				Taints: []corev1.Taint{{Key: "default-taint", Value: "a-taint", Effect: corev1.TaintEffectNoSchedule}}},
		}
		return admin.Create(ctx, n)
	}); err != nil {
		return fmt.Errorf("creating nodes: %w", err)
	}
	if err := parallel(ctx, 50, rssGroups, func(i int) error {
		ig, err := group(ns, fmt.Sprintf("group-%d", i), int64(perGroup), int64(perGroup))
		if err != nil {
			return err
		}
		return admin.Create(ctx, ig)
	}); err != nil {
		return fmt.Errorf("creating groups: %w", err)
	}
	// Every group reconciled once (its status written).
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.InstanceGroupList{}
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		done := 0
		for _, ig := range list.Items {
			if ig.Status.CurrentState != "" {
				done++
			}
		}
		return done == rssGroups, nil
	}); err != nil {
		return fmt.Errorf("not every group was reconciled: %w", err)
	}
	time.Sleep(30 * time.Second) // and then left alone for a while
	status, err := procStatus(cmd.Process.Pid)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("manager_rss_mib_%d_groups_%d_nodes", rssGroups, rssNodes), status["VmHWM"]/1024, "MiB")
	// Of the resident memory now: the heap and stacks, and the binary's
	// own pages (file-backed).
	report(fmt.Sprintf("manager_rss_anon_mib_%d_groups_%d_nodes", rssGroups, rssNodes), status["RssAnon"]/1024, "MiB")
	report(fmt.Sprintf("manager_rss_file_mib_%d_groups_%d_nodes", rssGroups, rssNodes), status["RssFile"]/1024, "MiB")
	if heapProfile != "" {
		return fetch(ctx, "http://"+pprofAddr+"/debug/pprof/heap", heapProfile)
	}
	return nil
}

// fetch writes the body of a GET of url (see download) to the file path.
func fetch(ctx context.Context, url, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := download(ctx, http.DefaultClient, url, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// download copies the body of a GET of url through hc to w. Errors: the
// request failing, or an answer other than 200 (its status and the start
// of its body).
func download(ctx context.Context, hc *http.Client, url string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// procStatus reads the memory lines of /proc/<pid>/status, in KiB.
func procStatus(pid int) (map[string]float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), ":")
		if v, found := strings.CutSuffix(strings.TrimSpace(value), " kB"); ok && found {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				out[name] = n
			}
		}
	}
	if out["VmHWM"] == 0 {
		return nil, errors.New("no VmHWM in /proc/<pid>/status")
	}
	return out, s.Err()
}
