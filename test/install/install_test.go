package install_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/install"
)

// TestHelmInstall installs the chart with helm into the full local
// environment (control plane, kwok kubelets, moto, the instance-to-node
// bridge), with the example boundary ConfigMap adapted to the AWS
// resources it first creates in moto, and runs the built image (make
// image) as a replica of the chart's Deployment: the image's amd64 file
// system unpacked, its entrypoint run under chroot as the image's user
// 65532:65532 with the Deployment's arguments (--leader-elect,
// --cert-rotation, ...), its ServiceAccount's token mounted where
// in-cluster configuration reads it, its webhook configurations served
// with the rotator's certificate (see install.StartManager). Then a tenant, a user with a Role in its
// namespace only, submits the example short InstanceGroup, sees it Ready
// with Ready nodes carrying its labels, deletes it, and nothing is left in
// AWS.
//
// That the chart's RBAC is sufficient is shown by all of this working with
// no request of the manager refused (no "forbidden" in its log); that it is
// not more than needed is mostly TestRBAC's job in charts/instance-manager
// (the authorizer's answers for what the manager needs and for what it
// does not: other ConfigMaps and Secrets, other webhook configurations and
// Leases, deleting pods), which this test complements with real requests,
// made with the running replica's own credentials, for privileges an
// attacker holding its token would want: a tenant's Secret, every Secret,
// pods, tokens of other ServiceAccounts, impersonation.
func TestHelmInstall(t *testing.T) {
	if os.Getenv(env.BinDirEnv) == "" {
		t.Skip("needs the local environment and bin/helm: run make test")
	}
	if _, err := install.Helm(); err != nil {
		t.Fatal(err)
	}
	e := env.Start(t, env.AllComponents())
	ctx := t.Context()
	logs := &capturingWriter{t: t}
	t.Cleanup(logs.close) // runs after the manager has stopped
	admin, err := client.New(e.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	cloud, values := exampleValues(t, e)
	values["clusterName"] = cloud.Cluster // the installation manages the example's cluster only
	rel, err := install.Install(ctx, e, values)
	if err != nil {
		t.Fatal(err)
	}

	m, err := install.StartManager(ctx, e, rel, install.ManagerOptions{
		Dir: t.TempDir(), LogWriter: logs, ReadyTimeout: 4 * time.Minute,
	})
	if err != nil {
		t.Fatalf("running the image as a replica of the chart's Deployment: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !m.Options.LeaderElect || !m.Options.CertRotation {
		t.Errorf("the chart's arguments: --leader-elect=%v --cert-rotation=%v, want both", m.Options.LeaderElect, m.Options.CertRotation)
	}
	if m.Options.ClusterName != cloud.Cluster {
		t.Errorf("the chart's --cluster-name = %q, want the chart value clusterName %q", m.Options.ClusterName, cloud.Cluster)
	}
	if want := fmt.Sprintf("system:serviceaccount:%s:%s", rel.Namespace, rel.ServiceAccount()); m.User != want {
		t.Errorf("the replica runs as %s, want %s", m.User, want)
	}
	checkContainerProcess(t, m, rel)

	// A tenant submits the short InstanceGroup.
	tenant, ig := exampleTenant(t, e)
	submittedLabels := ig.Spec.EKS.Configuration.Labels
	if err := tenant.Client.Create(ctx, ig); err != nil {
		t.Fatalf("the tenant creating %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	// The stored object is the effective spec: the admin's defaults filled
	// in by the chart's mutating webhook.
	stored := &v1alpha1.InstanceGroup{}
	if err := tenant.Client.Get(ctx, client.ObjectKeyFromObject(ig), stored); err != nil {
		t.Fatal(err)
	}
	c := stored.Spec.EKS.Configuration
	if stored.Spec.Provisioner != v1alpha1.ProvisionerEKS || c.ClusterName != cloud.Cluster || c.Image != cloud.AMIs[0] ||
		!slices.Equal(c.Subnets, cloud.Subnets) || !slices.Equal(c.SecurityGroups, cloud.SecurityGroups) || c.RoleName != cloud.Role {
		t.Errorf("the stored spec lacks the admin's defaults: provisioner %q, cluster %q, image %q, subnets %v, securityGroups %v, role %q",
			stored.Spec.Provisioner, c.ClusterName, c.Image, c.Subnets, c.SecurityGroups, c.RoleName)
	}
	if stored.Annotations[v1alpha1.AnnotationSubmittedSpec] == "" {
		t.Errorf("the stored object has no %s annotation", v1alpha1.AnnotationSubmittedSpec)
	}

	ready := waitForGroup(t, tenant.Client, ig, 5*time.Minute, func(cur *v1alpha1.InstanceGroup) bool {
		return cur.Status.CurrentState == v1alpha1.StateReady && conditionTrue(cur, v1alpha1.ConditionReady)
	}, "Ready")
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelInstanceGroup: ig.Name, v1alpha1.LabelInstanceGroupNamespace: ig.Namespace}); err != nil {
		t.Fatal(err)
	}
	if int64(len(nodes.Items)) != ig.Spec.EKS.MinSize {
		t.Errorf("the group has %d nodes, want minSize %d", len(nodes.Items), ig.Spec.EKS.MinSize)
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		for k, v := range submittedLabels {
			if n.Labels[k] != v {
				t.Errorf("node %s: label %s=%q, want the tenant's %q", n.Name, k, n.Labels[k], v)
			}
		}
		if n.Labels["a-default-label"] != "true" || n.Labels[corev1.LabelInstanceTypeStable] != ig.Spec.EKS.Configuration.InstanceType {
			t.Errorf("node %s lacks the admin's default label or the tenant's instance type: %v", n.Name, n.Labels)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == "default-taint" }) {
			t.Errorf("node %s lacks the admin's default taint: %v", n.Name, n.Spec.Taints)
		}
	}
	groups, err := autoscaling.NewFromConfig(e.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{ready.Status.ActiveScalingGroupName}})
	if err != nil || len(groups.AutoScalingGroups) != 1 {
		t.Fatalf("Auto Scaling group %s: %v (%d found)", ready.Status.ActiveScalingGroupName, err, len(groups.AutoScalingGroups))
	}
	tags := map[string]string{}
	for _, tg := range groups.AutoScalingGroups[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags["tag-key"] != "tag-value" || tags["a-default-tag"] != "a-default-value" {
		t.Errorf("the Auto Scaling group lacks the tenant's or the admin's tag: %v", tags)
	}

	checkReplicaCannot(t, e.Config, m.Config, tenant)
	checkHostileTemplatesLeaveTheReplicaRunning(t, tenant, m, rel)

	// The tenant deletes its group; nothing is left behind.
	if err := tenant.Client.Delete(ctx, ig); err != nil {
		t.Fatalf("the tenant deleting %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	eventually(t, 5*time.Minute, "the InstanceGroup to be gone", func() bool {
		err := tenant.Client.Get(ctx, client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{})
		return apierrors.IsNotFound(err)
	})
	var leftovers []string
	for deadline := time.Now().Add(2 * time.Minute); ; {
		inv, err := cloud.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leftovers = inv.Leftovers()
		if err := admin.List(ctx, nodes, client.MatchingLabels{v1alpha1.LabelInstanceGroup: ig.Name}); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			leftovers = append(leftovers, "node "+n.Name)
		}
		if len(leftovers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind 2m after the InstanceGroup was deleted: %s", strings.Join(leftovers, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
	auth := &corev1.ConfigMap{}
	if err := admin.Get(ctx, eks.AuthConfigMap, auth); err != nil {
		t.Fatal(err)
	}
	if role := ready.Status.NodesInstanceRoleArn; role == "" || strings.Contains(auth.Data["mapRoles"], role) {
		t.Errorf("aws-auth still maps the deleted group's role %q: %s", role, auth.Data["mapRoles"])
	}

	select {
	case <-m.Done():
		t.Fatalf("the manager stopped: %v", m.Err())
	default:
	}
	if line := logs.find("forbidden"); line != "" {
		t.Errorf("the API server refused the manager something under the chart's RBAC:\n%s", line)
	}
}

// exampleValues creates the cluster admin's AWS resources in moto and
// returns them with the chart values that install the example boundary
// ConfigMap pointing at them (first AMI as the default image).
func exampleValues(t *testing.T, e *env.Environment) (*install.Cloud, map[string]any) {
	t.Helper()
	cloud, err := install.NewCloud(t.Context(), e.AWS)
	if err != nil {
		t.Fatalf("creating the admin's AWS resources in moto: %v", err)
	}
	boundaries, err := cloud.Boundaries(cloud.AMIs[0])
	if err != nil {
		t.Fatal(err)
	}
	values, err := install.ChartValues(boundaries)
	if err != nil {
		t.Fatal(err)
	}
	return cloud, values
}

// exampleTenant makes the tenant alice, owner of namespace team-a, and
// returns it with its short InstanceGroup (examples/tenant-short.yaml),
// not yet created.
func exampleTenant(t *testing.T, e *env.Environment) (*install.Tenant, *v1alpha1.InstanceGroup) {
	t.Helper()
	tenant, err := install.NewTenant(t.Context(), e.Config, "team-a", "alice")
	if err != nil {
		t.Fatal(err)
	}
	ig, err := tenant.ShortGroup()
	if err != nil {
		t.Fatal(err)
	}
	return tenant, ig
}

// checkReplicaCannot makes real requests with the replica's credentials
// (cfg) and fails t unless each is refused: what a stolen manager token
// must not give. adminConfig creates the tenant's Secret it tries to read.
func checkReplicaCannot(t *testing.T, adminConfig, cfg *rest.Config, tenant *install.Tenant) {
	t.Helper()
	ctx := t.Context()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace, Name: "db-password"}, StringData: map[string]string{"password": "hunter2"}}
	if _, err := kubernetes.NewForConfigOrDie(adminConfig).CoreV1().Secrets(tenant.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replica := kubernetes.NewForConfigOrDie(cfg)
	impersonating := rest.CopyConfig(cfg)
	impersonating.Impersonate = rest.ImpersonationConfig{UserName: tenant.User}
	for what, call := range map[string]func() error{
		"read a tenant's Secret": func() error {
			_, err := replica.CoreV1().Secrets(tenant.Namespace).Get(ctx, secret.Name, metav1.GetOptions{})
			return err
		},
		"list Secrets in every namespace": func() error {
			_, err := replica.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		},
		"create a pod in a tenant's namespace": func() error {
			_, err := replica.CoreV1().Pods(tenant.Namespace).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "registry.example/x:1"}}},
			}, metav1.CreateOptions{})
			return err
		},
		"get a token for another ServiceAccount": func() error {
			_, err := replica.CoreV1().ServiceAccounts(tenant.Namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		},
		"impersonate a tenant": func() error {
			_, err := kubernetes.NewForConfigOrDie(impersonating).CoreV1().Pods(tenant.Namespace).List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the manager's ServiceAccount can %s: got %v, want Forbidden", what, err)
		}
	}
}

// waitForGroup polls ig as c until done holds, failing t after timeout
// with the group's last state and conditions.
func waitForGroup(t *testing.T, c client.Client, ig *v1alpha1.InstanceGroup, timeout time.Duration, done func(*v1alpha1.InstanceGroup) bool, what string) *v1alpha1.InstanceGroup {
	t.Helper()
	cur := &v1alpha1.InstanceGroup{}
	deadline := time.Now().Add(timeout)
	for {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(ig), cur)
		if err == nil && done(cur) {
			return cur
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("get: %v", err)
			if err == nil {
				msg = fmt.Sprintf("state %s, generation %d (observed %d), currentMin %d, currentMax %d", cur.Status.CurrentState,
					cur.Generation, cur.Status.ObservedGeneration, cur.Status.CurrentMin, cur.Status.CurrentMax)
				for _, c := range cur.Status.Conditions {
					msg += fmt.Sprintf("; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
				}
			}
			t.Fatalf("InstanceGroup %s/%s not %s after %s: %s", ig.Namespace, ig.Name, what, timeout, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func conditionTrue(ig *v1alpha1.InstanceGroup, typ string) bool {
	for _, c := range ig.Status.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// capturingWriter logs writes to t until close (a goroutine of the
// manager logging after the test would panic) and keeps them for find.
type capturingWriter struct {
	t      *testing.T
	mu     sync.Mutex
	all    bytes.Buffer
	closed bool
}

func (c *capturingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all.Write(p)
	if !c.closed {
		c.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (c *capturingWriter) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// find returns the first line containing s, case-insensitively, or "".
func (c *capturingWriter) find(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range strings.Split(c.all.String(), "\n") {
		if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
			return line
		}
	}
	return ""
}

// eventually polls cond every 500ms until it is true, failing t after
// timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
