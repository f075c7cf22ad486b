package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/install"
)

// config is what a demo run is told.
type config struct {
	// dir holds the run's state and logs (env/, manager.log,
	// environment.log); it is emptied first and kept afterwards.
	dir string
	// tenants is how many tenants (1 to len(tenantUsers)) submit a group.
	tenants int
	// keep leaves everything running after the rollout, until ctx ends,
	// instead of deleting the groups and stopping.
	keep bool
	// out receives the story.
	out      io.Writer
	timeouts timeouts
}

// timeouts bound each step; generous, for a loaded machine.
type timeouts struct {
	env, install, manager, ready, rollout, deletion time.Duration
}

func defaultTimeouts() timeouts {
	return timeouts{env: 3 * time.Minute, install: 3 * time.Minute, manager: 4 * time.Minute,
		ready: 6 * time.Minute, rollout: 10 * time.Minute, deletion: 6 * time.Minute}
}

// tenantUsers are the tenants, by namespace.
var tenantUsers = []struct{ namespace, user string }{
	{"team-a", "alice"}, {"team-b", "bob"}, {"team-c", "carol"},
}

// appName is the tenants' workload on their nodes.
const appName = "web"

// joinDelay is how long an instance runs before its node registers.
const joinDelay = 5 * time.Second

// summary is what the run measured.
type summary struct {
	envUp, install, managerReady time.Duration
	toReady                      map[types.NamespacedName]time.Duration
	rollout                      time.Duration
	groupsRolled, nodesReplaced  int
	drains                       int
	minPodsDuringRollout         int32
	deletion                     time.Duration
	leftovers                    []string
	total                        time.Duration
}

// failure is a step that did not happen: the step, why, and the logs
// that tell more.
type failure struct {
	step string
	err  error
	logs []string
}

func (f *failure) Error() string { return fmt.Sprintf("step %q failed: %v", f.step, f.err) }
func (f *failure) Unwrap() error { return f.err }

// demo is one run.
type demo struct {
	cfg             config
	start           time.Time
	mu              sync.Mutex
	configNamespace string
	cloud           *install.Cloud
	step            string
	logs            []string
}

// printf prints one line of the story, after the time since the start.
func (d *demo) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.cfg.out, "%7.1fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// say prints text wrapped to lines of 110 characters, the first after the
// time since the start, the others indented under it.
func (d *demo) say(format string, args ...any) {
	lines := strings.SplitN(wrap(fmt.Sprintf(format, args...), 110), "\n", 2)
	d.printf("%s", lines[0])
	if len(lines) > 1 {
		d.block(lines[1])
	}
}

// block prints lines indented under the last printf.
func (d *demo) block(text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(d.cfg.out, "%9s  %s\n", "", line)
	}
}

// title starts step n of total.
func (d *demo) title(n, total int, title string) {
	d.step = title
	d.mu.Lock()
	fmt.Fprintf(d.cfg.out, "\n=== [%d/%d] %s\n", n, total, title)
	d.mu.Unlock()
}

// fail returns err as the current step's failure.
func (d *demo) fail(err error) error {
	if err == nil {
		return nil
	}
	var f *failure
	if errors.As(err, &f) {
		return err
	}
	return &failure{step: d.step, err: err, logs: d.logs}
}

// imageLabel shows an AMI id as "ami-… (A)" / "(B)" / "(C)": the demo's images.
func (d *demo) imageLabel(id string) string {
	if id == "" {
		return "-"
	}
	if d.cloud != nil {
		for i, a := range d.cloud.AMIs {
			if a == id {
				return fmt.Sprintf("%s (%c)", id, 'A'+i)
			}
		}
	}
	return id
}

// run tells the story: environment, AWS resources, helm install, the
// manager out of cluster, tenants' groups to Ready, the admin's image
// change rolled to every group, deletion with nothing left in AWS. It
// returns the timings; an error is a *failure naming the step.
func run(ctx context.Context, cfg config) (sum *summary, err error) {
	d := &demo{cfg: cfg, start: time.Now()}
	sum = &summary{toReady: map[types.NamespacedName]time.Duration{}}
	if cfg.tenants < 1 || cfg.tenants > len(tenantUsers) {
		return nil, fmt.Errorf("tenants must be 1 to %d, not %d", len(tenantUsers), cfg.tenants)
	}
	const steps = 8
	fmt.Fprintf(cfg.out, "instance-manager demo: the Helm chart installed into a local cluster, %d tenant(s), one admin image change.\n", cfg.tenants)
	fmt.Fprintf(cfg.out, "Real kube-apiserver, controller-manager and scheduler; kwok kubelets; moto as AWS; state and logs in %s\n", cfg.dir)

	// 1. The local environment.
	d.title(1, steps, "Local environment")
	if err := clearDir(cfg.dir); err != nil {
		return nil, d.fail(err)
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, d.fail(err)
	}
	envLog, err := os.Create(filepath.Join(cfg.dir, "environment.log"))
	if err != nil {
		return nil, d.fail(err)
	}
	defer func() { _ = envLog.Close() }()
	managerLog, err := os.Create(filepath.Join(cfg.dir, "manager.log"))
	if err != nil {
		return nil, d.fail(err)
	}
	defer func() { _ = managerLog.Close() }()
	d.logs = []string{managerLog.Name(), envLog.Name()}

	d.printf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, moto and the instance-to-node bridge")
	opts := env.AllComponents()
	opts.Dir = filepath.Join(cfg.dir, "env")
	// As EC2 instances take a while to boot and join.
	opts.JoinDelay = joinDelay
	var envLogMu sync.Mutex
	opts.Logger = funcr.New(func(prefix, args string) {
		envLogMu.Lock()
		defer envLogMu.Unlock()
		fmt.Fprintf(envLog, "%s %s %s\n", time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: 1})
	startCtx, cancel := context.WithTimeout(ctx, cfg.timeouts.env)
	began := time.Now()
	e, err := env.New(startCtx, opts)
	cancel()
	if err != nil {
		return nil, d.fail(err)
	}
	d.logs = append(d.logs, filepath.Join(opts.Dir, "logs"))
	defer func() {
		if stopErr := e.Stop(); stopErr != nil && err == nil {
			err = d.fail(fmt.Errorf("stopping the local environment: %w", stopErr))
		}
	}()
	sum.envUp = time.Since(began)
	d.printf("up in %s: API server %s, AWS (moto) %s", round(sum.envUp), e.Config.Host, e.AWSEndpoint)
	admin, err := client.New(e.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		return nil, d.fail(err)
	}

	// 2. The admin's AWS resources.
	d.title(2, steps, "Cluster admin: the cluster's AWS resources (in moto)")
	cloud, err := install.NewCloud(ctx, e.AWS)
	if err != nil {
		return nil, d.fail(err)
	}
	d.cloud = cloud
	d.printf("created what the example boundary ConfigMap refers to:")
	d.block(wrap(cloud.Describe(), 110))
	d.printf("images: A = %s (%s), the nodes' image", cloud.AMIs[0], cloud.AMINames[cloud.AMIs[0]])
	d.printf("        B = %s (%s), the one the admin moves to later", cloud.AMIs[1], cloud.AMINames[cloud.AMIs[1]])
	d.printf("        C = %s (%s), a broken one: the demo's bridge never lets its instances join", cloud.AMIs[2], cloud.AMINames[cloud.AMIs[2]])

	// 3. helm install.
	d.title(3, steps, "Cluster admin: helm install")
	boundaries, err := cloud.Boundaries(cloud.AMIs[0])
	if err != nil {
		return nil, d.fail(err)
	}
	values, err := install.ChartValues(boundaries)
	if err != nil {
		return nil, d.fail(err)
	}
	d.printf("helm install %s charts/instance-manager --namespace %s --create-namespace --values values.yaml", install.ReleaseName, install.Namespace)
	d.block(wrap(fmt.Sprintf("values: boundaryConfigMap = examples/boundaries-configmap.yaml with its made-up ids replaced by moto's: image %s, subnets %s, securityGroups %s;",
		cloud.AMIs[0], strings.Join(cloud.Subnets, ","), strings.Join(cloud.SecurityGroups, ",")), 110) + "\n" +
		"certManager.enabled=false: the manager rotates its own webhook certificate;\n" +
		wrap(fmt.Sprintf("nodeSelector {%s: \"true\"}: the chart's pods stay Pending, the image runs outside the cluster as the replica", install.OutOfClusterNodeLabel), 110))
	began = time.Now()
	installCtx, cancel := context.WithTimeout(ctx, cfg.timeouts.install)
	rel, err := install.Install(installCtx, e, values)
	cancel()
	if err != nil {
		return nil, d.fail(err)
	}
	sum.install = time.Since(began)
	d.printf("installed in %s:", round(sum.install))
	d.block(helmStatus(rel.Output))

	// 4. The manager, out of cluster, as the chart's ServiceAccount.
	d.title(4, steps, "instance-manager: one replica of the chart's Deployment, run from the built image")
	began = time.Now()
	m, err := install.StartManager(ctx, e, rel, install.ManagerOptions{
		Dir: filepath.Join(cfg.dir, "pod"), LogWriter: managerLog, ReadyTimeout: cfg.timeouts.manager,
		ExtraArgs: []string{"--zap-encoder=console"}, // manager.log is read by people
	})
	if err != nil {
		return nil, d.fail(err)
	}
	defer func() {
		if stopErr := m.Stop(); stopErr != nil && err == nil {
			err = d.fail(fmt.Errorf("the manager: %w", stopErr))
		}
	}()
	sum.managerReady = time.Since(began)
	d.configNamespace = m.Options.ConfigNamespace
	d.printf("arguments, from the installed Deployment's pod template:")
	container, err := rel.ManagerContainer()
	if err != nil {
		return nil, d.fail(err)
	}
	d.block(wrap(strings.Join(container.Args, " "), 110))
	d.block(fmt.Sprintf("(listening on 127.0.0.1: webhooks %s, probes %s, metrics %s)", m.WebhookAddr, m.HealthAddr, m.MetricsAddr))
	d.say("container: the image's linux/%s file system unpacked into %s; its entrypoint %s runs there under chroot as %s, "+
		"with the token, CA and webhook certificate mounted where the kubelet would put them",
		runtime.GOARCH, m.Rootfs, m.Image.Config.Entrypoint[0], m.Image.Config.User)
	d.say("identity: %s, with a token from the TokenRequest API: the API server applies the chart's RBAC, nothing more", m.User)
	d.say("webhook TLS: the rotator put a CA and a certificate for %s.%s.svc in Secret %s and the CA in both webhook configurations' caBundle; "+
		"Service %s is now ExternalName 127.0.0.1 and the webhooks call port %s, so the API server dials this process and verifies "+
		"the certificate for the Service's name against the injected CA",
		m.Options.WebhookServiceName, rel.Namespace, m.Options.WebhookSecretName, m.Options.WebhookServiceName, strings.TrimPrefix(m.WebhookAddr, "127.0.0.1:"))
	d.say("ready in %s: /readyz OK, leader (Lease %s/%s), API server -> webhook round trip OK",
		round(sum.managerReady), rel.Namespace, m.Options.LeaderElectionID)

	// 5. Tenants.
	d.title(5, steps, "Tenants submit short InstanceGroups (each as itself: a user with a Role in its namespace)")
	var tenants []*install.Tenant
	var keys []types.NamespacedName
	created := map[types.NamespacedName]time.Time{}
	for i, tu := range tenantUsers[:cfg.tenants] {
		t, err := install.NewTenant(ctx, e.Config, tu.namespace, tu.user)
		if err != nil {
			return nil, d.fail(err)
		}
		tenants = append(tenants, t)
		ig, err := t.ShortGroup()
		if err != nil {
			return nil, d.fail(err)
		}
		if err := createApp(ctx, t, ig); err != nil {
			return nil, d.fail(err)
		}
		submittedSpec := *ig.Spec.DeepCopy() // Create fills ig with what the API server stored
		submitted, err := yaml.Marshal(map[string]any{"spec": submittedSpec})
		if err != nil {
			return nil, d.fail(err)
		}
		if err := t.Client.Create(ctx, ig); err != nil {
			return nil, d.fail(fmt.Errorf("%s creating InstanceGroup %s/%s: %w", t.User, ig.Namespace, ig.Name, err))
		}
		key := client.ObjectKeyFromObject(ig)
		created[key] = time.Now()
		keys = append(keys, key)
		d.printf("%s: kubectl apply -f tenant-short.yaml -n %s   (plus Deployment %s, 2 replicas, PDB maxUnavailable 1)", t.User, t.Namespace, appName)
		if i == 0 {
			d.block("submitted (tenant-short.yaml):\n" + indent(string(submitted), "  "))
			stored := &v1alpha1.InstanceGroup{}
			if err := t.Client.Get(ctx, key, stored); err != nil {
				return nil, d.fail(err)
			}
			added, err := specChanges(submittedSpec, stored.Spec)
			if err != nil {
				return nil, d.fail(err)
			}
			d.block("stored (kubectl get ig -o yaml): the mutating webhook added the admin's defaults and merged labels and tags:\n" + indent(added, "  "))
		}
	}
	w := newWatcher(d, admin, e.AWS, keys, appName, []string{"test-label", "a-default-label"})
	readyAt := map[types.NamespacedName]time.Duration{}
	if _, err := w.until(ctx, cfg.timeouts.ready, "every group Ready with its nodes and app pods", func(s *snapshot) bool {
		all := true
		for _, g := range s.groups {
			if groupReady(g) && g.podsAvailable == g.podsWant {
				if _, ok := readyAt[g.key]; !ok {
					readyAt[g.key] = time.Since(created[g.key])
				}
				continue
			}
			all = false
		}
		return all
	}); err != nil {
		return nil, d.fail(err)
	}
	sum.toReady = readyAt

	// 6. The admin changes the default image.
	d.title(6, steps, "Cluster admin changes the default image; every group rolls to it")
	w.resetCounters()
	newData, err := cloud.Boundaries(cloud.AMIs[1])
	if err != nil {
		return nil, d.fail(err)
	}
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: d.configNamespace, Name: app.ConfigMapName}, cm); err != nil {
		return nil, d.fail(err)
	}
	cm.Data = newData
	began = time.Now()
	if err := admin.Update(ctx, cm); err != nil {
		return nil, d.fail(fmt.Errorf("updating the boundary ConfigMap: %w", err))
	}
	d.printf("admin: kubectl edit configmap %s -n %s", app.ConfigMapName, d.configNamespace)
	d.block(fmt.Sprintf("defaults: image %s -> %s (accepted by the ConfigMap webhook)", d.imageLabel(cloud.AMIs[0]), d.imageLabel(cloud.AMIs[1])))
	s, err := w.until(ctx, cfg.timeouts.rollout, "every group rolled to the new image", func(s *snapshot) bool {
		for _, g := range s.groups {
			if !groupReady(g) || g.image != cloud.AMIs[1] || g.updated != g.total || g.upgrading == "True" || g.podsAvailable != g.podsWant {
				return false
			}
			for _, im := range g.nodeImages {
				if im != cloud.AMIs[1] {
					return false
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, d.fail(err)
	}
	sum.rollout = time.Since(began)
	sum.groupsRolled, sum.nodesReplaced, sum.drains, sum.minPodsDuringRollout = len(s.groups), w.nodesLeft, w.drains, w.minPods
	d.say("every group runs %s: %d nodes replaced, %d drains, app pods available never below %d per group",
		d.imageLabel(cloud.AMIs[1]), sum.nodesReplaced, sum.drains, sum.minPodsDuringRollout)

	// 7. A broken image, rolled out in waves.
	d.title(7, steps, "Cluster admin rolls out a broken image in waves: halted after the canary, rolled back")
	if err := d.brokenImage(ctx, e, admin, cloud, tenants, keys, cfg.timeouts.rollout); err != nil {
		return nil, d.fail(err)
	}

	if cfg.keep {
		d.title(8, steps, "DEMO_KEEP=1: everything keeps running (the groups are not deleted) until Ctrl-C")
		sum.total = time.Since(d.start)
		printSummary(cfg.out, d, sum)
		keepRunning(ctx, cfg, d, e, m, keys)
		return sum, nil
	}

	// 7. Deletion.
	d.title(8, steps, "Tenants delete their groups; nothing is left in AWS")
	w.resetCounters()
	began = time.Now()
	for _, t := range tenants {
		if err := t.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: appName}}); err != nil {
			return nil, d.fail(fmt.Errorf("%s deleting Deployment %s: %w", t.User, appName, err))
		}
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: keys[slices.IndexFunc(keys, func(k types.NamespacedName) bool { return k.Namespace == t.Namespace })].Name}}
		if err := t.Client.Delete(ctx, ig); err != nil {
			return nil, d.fail(fmt.Errorf("%s deleting InstanceGroup %s/%s: %w", t.User, ig.Namespace, ig.Name, err))
		}
		d.printf("%s: kubectl delete deployment %s; kubectl delete ig %s -n %s", t.User, appName, ig.Name, t.Namespace)
	}
	if _, err := w.until(ctx, cfg.timeouts.deletion, "every group and its nodes gone", func(s *snapshot) bool {
		for _, g := range s.groups {
			if g.exists {
				return false
			}
		}
		return len(s.nodes) == 0
	}); err != nil {
		return nil, d.fail(err)
	}
	var inv install.Inventory
	deadline := time.Now().Add(cfg.timeouts.deletion)
	for {
		if inv, err = cloud.Inventory(ctx); err != nil {
			return nil, d.fail(err)
		}
		if len(inv.Leftovers()) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	sum.deletion = time.Since(began)
	sum.leftovers = inv.Leftovers()
	d.printf("moto (AWS) after deletion:")
	iamLine := fmt.Sprintf("only the admin's %s / %s", cloud.Role, cloud.InstanceProfile)
	if extra := append(slices.Clone(inv.Roles), inv.InstanceProfiles...); len(extra) > 0 {
		iamLine = fmt.Sprintf("the admin's %s / %s and %s", cloud.Role, cloud.InstanceProfile, strings.Join(extra, ", "))
	}
	d.block(fmt.Sprintf("aws autoscaling describe-auto-scaling-groups   -> %d groups\n"+
		"aws ec2 describe-launch-templates               -> %d launch templates\n"+
		"aws ec2 describe-instances                      -> %d not terminated (%d terminated)\n"+
		"aws iam list-roles / list-instance-profiles     -> %s",
		len(inv.AutoScalingGroups), len(inv.LaunchTemplates), len(inv.LiveInstances), inv.Terminated, iamLine))
	if len(sum.leftovers) > 0 {
		return nil, d.fail(fmt.Errorf("left behind in AWS after deletion: %s", strings.Join(sum.leftovers, ", ")))
	}
	d.say("nothing left in AWS: no Auto Scaling group, launch template or running instance; the admin's role, profile and key pair stay")
	// The groups' shared node role is unmapped from aws-auth by the last
	// group deleted; groups deleted at the same moment may each still see
	// the other and leave it (providers/eks nodeAccess.revoke counts
	// groups being deleted as users of the role).
	auth := &corev1.ConfigMap{}
	if err := admin.Get(ctx, eks.AuthConfigMap, auth); err != nil {
		return nil, d.fail(fmt.Errorf("reading %s: %w", eks.AuthConfigMap, err))
	}
	if strings.Contains(auth.Data["mapRoles"], cloud.Role) {
		d.say("NOTE: aws-auth (kube-system) still maps %s: the groups sharing it were deleted at the same moment and each saw the other", cloud.Role)
	} else {
		d.say("aws-auth (kube-system) no longer maps %s", cloud.Role)
	}
	sum.total = time.Since(d.start)
	printSummary(cfg.out, d, sum)
	return sum, nil
}

// clearDir removes dir, the state of an earlier run, refusing a non-empty
// directory that holds no demo state (a mistyped -dir).
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "environment.log")); err != nil {
			return fmt.Errorf("refusing to empty %s: it is not empty and holds no earlier demo run (no environment.log)", dir)
		}
	}
	return os.RemoveAll(dir)
}

// groupReady: the group is Ready, not rotating, with minSize Ready nodes.
func groupReady(g group) bool {
	return g.exists && g.state == v1alpha1.StateReady && g.ready == "True" && g.readyNodes >= int(g.min) && g.min > 0
}

// createApp creates, as the tenant, a Deployment of 2 replicas on the
// group's nodes (tolerating every taint) and a PodDisruptionBudget
// allowing 1 of them down: the drains of a rotation evict them.
func createApp(ctx context.Context, t *install.Tenant, ig *v1alpha1.InstanceGroup) error {
	labels := map[string]string{"app": appName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: appName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{v1alpha1.LabelInstanceGroup: ig.Name, v1alpha1.LabelInstanceGroupNamespace: ig.Namespace},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:   []corev1.Container{{Name: appName, Image: "registry.example/web:1"}},
				},
			},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: appName},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	for _, o := range []client.Object{dep, pdb} {
		if err := t.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("%s creating %T %s/%s: %w", t.User, o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// helmStatus keeps helm's status lines and the first lines of its NOTES.
func helmStatus(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		for _, p := range []string{"NAME:", "NAMESPACE:", "STATUS:", "REVISION:", "Webhook certificates:", "Boundary ConfigMap:"} {
			if strings.HasPrefix(line, p) || strings.HasPrefix(strings.TrimSpace(line), p) {
				keep = append(keep, strings.TrimSpace(line))
			}
		}
	}
	return strings.Join(keep, "\n")
}

// wrap breaks s at spaces into lines of at most width characters.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

// specChanges lists, one "path: value" line each, what stored has that
// submitted has not or has differently: maps are compared key by key,
// lists and scalars as JSON.
func specChanges(submitted, stored v1alpha1.InstanceGroupSpec) (string, error) {
	flat := func(spec v1alpha1.InstanceGroupSpec) (map[string]string, error) {
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out := map[string]string{}
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			if obj, ok := v.(map[string]any); ok && len(obj) > 0 {
				for k, sub := range obj {
					walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
				}
				return
			}
			b, _ := json.Marshal(v)
			out[prefix] = string(b)
		}
		walk("spec", m)
		return out, nil
	}
	before, err := flat(submitted)
	if err != nil {
		return "", err
	}
	after, err := flat(stored)
	if err != nil {
		return "", err
	}
	var lines []string
	for path, v := range after {
		if before[path] != v {
			lines = append(lines, path+": "+v)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// printSummary prints the timings.
func printSummary(out io.Writer, d *demo, s *summary) {
	fmt.Fprintf(out, "\n=== Summary\n")
	fmt.Fprintf(out, "  local environment up           %s\n", round(s.envUp))
	fmt.Fprintf(out, "  helm install                   %s\n", round(s.install))
	fmt.Fprintf(out, "  manager ready (TLS, lease)     %s\n", round(s.managerReady))
	keys := make([]types.NamespacedName, 0, len(s.toReady))
	for k := range s.toReady {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k.Namespace, round(s.toReady[k])))
	}
	fmt.Fprintf(out, "  create -> Ready (with app)     %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(out, "  fan-out rollout %s -> %s\n", d.imageLabel(d.cloud.AMIs[0]), d.imageLabel(d.cloud.AMIs[1]))
	fmt.Fprintf(out, "                                 %s: %d groups, %d nodes replaced, %d drains, app pods >= %d/2 throughout\n",
		round(s.rollout), s.groupsRolled, s.nodesReplaced, s.drains, s.minPodsDuringRollout)
	if s.deletion > 0 {
		fmt.Fprintf(out, "  deletion -> nothing in AWS     %s\n", round(s.deletion))
	}
	fmt.Fprintf(out, "  total                          %s\n", round(s.total))
}

// keepRunning prints how to look at the running demo and waits for ctx.
func keepRunning(ctx context.Context, cfg config, d *demo, e *env.Environment, m *install.Manager, keys []types.NamespacedName) {
	awsEnv := filepath.Join(cfg.dir, "aws.env")
	_ = os.WriteFile(awsEnv, fmt.Appendf(nil, "export AWS_ENDPOINT_URL=%s\nexport AWS_REGION=%s\nexport AWS_DEFAULT_REGION=%s\nexport AWS_ACCESS_KEY_ID=%s\nexport AWS_SECRET_ACCESS_KEY=%s\n",
		e.AWSEndpoint, env.AWSRegion, env.AWSRegion, env.AWSAccessKeyID, env.AWSSecretAccessKey), 0o600)
	fmt.Fprintf(cfg.out, "\nEverything keeps running until Ctrl-C.\n")
	fmt.Fprintf(cfg.out, "  kubeconfig (admin):  %s\n", e.Kubeconfig)
	fmt.Fprintf(cfg.out, "  AWS endpoint (moto): %s   (region %s, any credentials)\n", e.AWSEndpoint, env.AWSRegion)
	fmt.Fprintf(cfg.out, "\n  export KUBECONFIG=%s\n", e.Kubeconfig)
	fmt.Fprintf(cfg.out, "  kubectl get ig -A\n  kubectl get nodes -L test-label,a-default-label\n  kubectl get events -n %s\n", keys[0].Namespace)
	fmt.Fprintf(cfg.out, "  kubectl delete ig %s -n %s     # and watch the manager clean up AWS\n", keys[0].Name, keys[0].Namespace)
	fmt.Fprintf(cfg.out, "\n  source %s     # AWS_ENDPOINT_URL and dummy credentials for the aws CLI\n", awsEnv)
	fmt.Fprintf(cfg.out, "  aws autoscaling describe-auto-scaling-groups --query 'AutoScalingGroups[].[AutoScalingGroupName,DesiredCapacity]'\n")
	fmt.Fprintf(cfg.out, "  aws ec2 describe-instances --query 'Reservations[].Instances[].[InstanceId,ImageId,State.Name]'\n")
	fmt.Fprintf(cfg.out, "\n  manager log: %s   metrics: http://%s/metrics\n", filepath.Join(cfg.dir, "manager.log"), m.MetricsAddr)
	fmt.Fprintf(cfg.out, "  component logs: %s\n", filepath.Join(e.Dir, "logs"))
	select {
	case <-ctx.Done():
	case <-m.Done():
		d.printf("the manager stopped: %v", m.Err())
	}
	fmt.Fprintf(cfg.out, "\nstopping\n")
}
