package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

var errNoEnvironment = env.ErrNoEnvironment

// plainGroup is a copy of the InstanceGroup CRD under another API group,
// not covered by instance-manager's webhooks: the API server's own cost for
// the same object.
var plainGroup = schema.GroupVersionKind{Group: "bench.instancemgr.example", Version: "v1alpha1", Kind: "PlainGroup"}

// fanOutGroups is how many InstanceGroups the fan-out figure uses.
var fanOutGroups = envInt("BENCH_FANOUT_GROUPS", 2000)

// benchAPIServer measures, through the real API server with the manager in
// process: the p99 create latency of InstanceGroups (through our webhooks)
// over that of PlainGroups (no webhooks), interleaved, at 50 and 200
// concurrent clients; and the fan-out of a ConfigMap image change to
// fanOutGroups groups over fanOutGroups plain updates.
//
// apiserverProfile, when not empty, is where a CPU profile of the API
// server during InstanceGroup creates is written.
func benchAPIServer(report func(string, float64, string), apiserverProfile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	e, err := env.New(ctx, env.Options{
		CRDDirectoryPaths: []string{harness.CRDPath()}, WebhookInstallOptions: harness.WebhookOptions(), AWS: true,
		APIServerProfiling: apiserverProfile != "",
	})
	cancel()
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
	bg := context.Background()
	if err := harness.EnsureConfigNamespace(bg, admin); err != nil {
		return err
	}
	if err := installPlainCRD(bg, admin); err != nil {
		return err
	}
	// The manager starts as a replica that is not the leader (another
	// holds the Lease): it loads the boundaries and serves the webhooks but
	// reconciles nothing, so the creates measure the webhooks, not the
	// controller's reaction to the new groups (which, in a cluster, runs on
	// another node than the API server and does not share its CPUs).
	if err := holdLease(bg, admin); err != nil {
		return err
	}
	data := exampleBoundaries()
	if err := webhookCreates(bg, admin, e, data, report, false, apiserverProfile); err != nil {
		return err
	}
	if err := webhookCreates(bg, admin, e, data, report, true, ""); err != nil {
		return err
	}

	// A manager that leads (no leader election): the fan-out is the
	// controller's.
	mgr, err := harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{AWS: &e.AWS})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	defer func() { _ = mgr.Stop() }()
	fan, plain, err := fanOut(bg, admin, data, fanOutGroups)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("fanout_seconds_%d", fanOutGroups), fan.Seconds(), "s")
	report("fanout_ratio", fan.Seconds()/plain.Seconds(), "ratio")
	return nil
}

// webhookCreates starts a manager that does not lead (see benchAPIServer),
// serving the webhooks over HTTP/1.1 only or, with http2, over HTTP/2 as
// well (--webhook-http2; its figures are suffixed _http2), writes the
// boundaries data, and reports the create latency ratios at 50 and 200
// clients and the CPU per create (createCPUFigures; profile, when not
// empty, is where its API server profile goes). It deletes the groups it
// created and stops the manager before it returns.
func webhookCreates(ctx context.Context, admin client.Client, e *env.Environment, data map[string]string, report func(string, float64, string), http2 bool, profile string) error {
	suffix := ""
	if http2 {
		suffix = "_http2"
	}
	mgr, err := harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{AWS: &e.AWS,
		LeaderElect: true, LeaderElectionNamespace: harness.ConfigNamespace, LeaderElectionID: benchLease, WebhookHTTP2: http2})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	defer func() { _ = mgr.Stop() }()
	if err := harness.WriteBoundaries(ctx, admin, data); err != nil {
		return err
	}
	// A replica that does not lead announces nothing: wait until its
	// webhooks admit a group (a server-side dry run).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := shortGroup(v1alpha1.GroupVersion.WithKind("InstanceGroup"), metav1.NamespaceDefault, "probe", "")
		return admin.Create(ctx, probe, client.DryRunAll) == nil, nil
	}); err != nil {
		return fmt.Errorf("the webhooks did not admit a group with the boundaries loaded: %w", err)
	}
	var namespaces []string
	for _, c := range []int{50, 200} {
		ns := fmt.Sprintf("bench-c%d%s", c, strings.ReplaceAll(suffix, "_", "-"))
		namespaces = append(namespaces, ns)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		ours, plain, err := interleavedCreates(ctx, admin, ns, c, 4*c)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("create_latency_ratio_p99_c%d%s", c, suffix), ours.Seconds()/plain.Seconds(), "ratio")
		report(fmt.Sprintf("create_latency_p99_ms_c%d%s", c, suffix), float64(ours.Microseconds())/1000, "ms")
		report(fmt.Sprintf("create_latency_plain_p99_ms_c%d%s", c, suffix), float64(plain.Microseconds())/1000, "ms")
	}
	ns := "bench-cpu" + strings.ReplaceAll(suffix, "_", "-")
	namespaces = append(namespaces, ns)
	if err := createCPUFigures(ctx, admin, e, ns, suffix, report, profile); err != nil {
		return err
	}
	// Never reconciled, the groups have no finalizer yet and go at once.
	return deleteGroups(ctx, admin, namespaces...)
}

// deleteGroups deletes the InstanceGroups and PlainGroups of namespaces and
// waits until they are gone.
func deleteGroups(ctx context.Context, c client.Client, namespaces ...string) error {
	kinds := []schema.GroupVersionKind{v1alpha1.GroupVersion.WithKind("InstanceGroup"), plainGroup}
	for _, ns := range namespaces {
		for _, gvk := range kinds {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := c.DeleteAllOf(ctx, u, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("deleting the %ss of %s: %w", gvk.Kind, ns, err)
			}
		}
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range namespaces {
			for _, gvk := range kinds {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil || len(list.Items) > 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// installPlainCRD installs the InstanceGroup CRD renamed to plainGroup.
func installPlainCRD(ctx context.Context, c client.Client) error {
	raw, err := os.ReadFile(filepath.Join(harness.CRDPath(), "instancemgr.keikoproj.io_instancegroups.yaml"))
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		return err
	}
	plural := strings.ToLower(plainGroup.Kind) + "s"
	crd.SetName(plural + "." + plainGroup.Group)
	crd.SetAnnotations(nil)
	spec := crd.Object["spec"].(map[string]any)
	spec["group"] = plainGroup.Group
	spec["names"] = map[string]any{"kind": plainGroup.Kind, "listKind": plainGroup.Kind + "List", "plural": plural, "singular": strings.ToLower(plainGroup.Kind)}
	if err := c.Create(ctx, crd); err != nil {
		return fmt.Errorf("installing the plain CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(plainGroup.GroupVersion().WithKind(plainGroup.Kind + "List"))
		return c.List(ctx, list) == nil, nil
	})
}

// shortGroup is a tenant's short InstanceGroup (as unstructured, so that
// the same body can be sent as a PlainGroup).
func shortGroup(gvk schema.GroupVersionKind, ns, name, image string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"eks": map[string]any{"minSize": int64(1), "maxSize": int64(3), "configuration": map[string]any{
			"instanceType": "m5.large", "labels": map[string]any{"team": ns},
		}}},
	}}
	if image != "" {
		_ = unstructured.SetNestedField(u.Object, image, "spec", "eks", "configuration", "image")
	}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// interleavedCreates has `clients` workers create n objects in all, each
// worker alternating an InstanceGroup and a PlainGroup of the same body,
// and returns the p99 create latency of each kind.
func interleavedCreates(ctx context.Context, c client.Client, ns string, clients, n int) (ours, plain time.Duration, err error) {
	igKind := v1alpha1.GroupVersion.WithKind("InstanceGroup")
	var mu sync.Mutex
	var latOurs, latPlain []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += clients {
				order := []schema.GroupVersionKind{igKind, plainGroup}
				if i%2 == 1 { // alternate which kind goes first
					order[0], order[1] = order[1], order[0]
				}
				for _, gvk := range order {
					obj := shortGroup(gvk, ns, fmt.Sprintf("g-%d", i), "")
					t0 := time.Now()
					err := c.Create(ctx, obj)
					d := time.Since(t0)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = fmt.Errorf("creating %s %s/%s: %w", gvk.Kind, ns, obj.GetName(), err)
					}
					if gvk == plainGroup {
						latPlain = append(latPlain, d)
					} else {
						latOurs = append(latOurs, d)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return percentile(latOurs, 0.99), percentile(latPlain, 0.99), nil
}

// fanOut creates n InstanceGroups and n PlainGroups, changes the
// ConfigMap's default image and times how long until every group carries
// it, then times n plain updates of the PlainGroups, one at a time as the
// fan-out's single worker does.
func fanOut(ctx context.Context, c client.Client, data map[string]string, n int) (fan, plain time.Duration, err error) {
	const ns = "bench-fanout"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, 0, err
	}
	if _, _, err := interleavedCreates(ctx, c, ns, 50, n); err != nil {
		return 0, 0, err
	}
	newData := map[string]string{}
	for k, v := range data {
		newData[k] = v
	}
	newData["defaults"] = strings.Replace(data["defaults"], "image: ami-1234", "image: ami-5678", 1)
	if newData["defaults"] == data["defaults"] {
		return 0, 0, errors.New("the example ConfigMap no longer defaults image: ami-1234")
	}
	start := time.Now()
	if err := harness.WriteBoundaries(ctx, c, newData); err != nil {
		return 0, 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.InstanceGroupList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		for _, ig := range list.Items {
			if ig.Spec.EKS == nil || ig.Spec.EKS.Configuration == nil || ig.Spec.EKS.Configuration.Image != "ami-5678" {
				return false, nil
			}
		}
		return len(list.Items) == n, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("fan-out to %d groups did not finish: %w", n, err)
	}
	fan = time.Since(start)

	start = time.Now()
	for i := range n {
		obj := shortGroup(plainGroup, ns, fmt.Sprintf("g-%d", i), "")
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return 0, 0, err
		}
		_ = unstructured.SetNestedField(obj.Object, "ami-5678", "spec", "eks", "configuration", "image")
		if err := c.Update(ctx, obj); err != nil {
			return 0, 0, fmt.Errorf("plain update %d: %w", i, err)
		}
	}
	return fan, time.Since(start), nil
}

// atScale sets the quotas of a boundary ConfigMap's data for the bench's
// thousands of groups: no namespace or cluster bound, and room in AWS's
// Auto Scaling group limit (the emulator enforces none; the default quotas
// and limits, boundaries.DefaultQuotas, would refuse the 11th group of a
// namespace and the 501st Auto Scaling group). It returns data.
func atScale(data map[string]string) map[string]string {
	data["quotas"] = "awsLimits: {autoScalingGroupsPerRegion: 100000}\n"
	return data
}

// exampleBoundaries is the data of the repository's example boundary
// ConfigMap, atScale.
func exampleBoundaries() map[string]string {
	raw, err := os.ReadFile(harness.ExamplesPath("boundaries-configmap.yaml"))
	if err != nil {
		fail("reading the example ConfigMap", err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, cm); err != nil {
		fail("decoding the example ConfigMap", err)
	}
	return atScale(cm.Data)
}

func envInt(name string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(name), &v); err == nil && v > 0 {
		return v
	}
	return def
}

// benchLease is the leader election Lease of the manager of the API
// server figures.
const benchLease = "instance-manager-bench"

// holdLease stores the manager's leader election Lease held by another
// replica for an hour, so that the manager starting next does not lead.
func holdLease(ctx context.Context, c client.Client) error {
	now := metav1.NewMicroTime(time.Now())
	return c.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: harness.ConfigNamespace, Name: benchLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	})
}
