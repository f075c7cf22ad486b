package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
	"github.com/instancemgr/instance-manager/webhooks"
)

const webhookNamespace = "chaos-webhook"

// tenantClient creates a Role and RoleBinding that let user manage
// InstanceGroups in namespace and returns a client acting as user.
func tenantClient(t *testing.T, namespace, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroups"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"instancegroups"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroups"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(environment.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setFailurePolicy sets the failure policy of every instance-manager
// webhook: Ignore is what an admin does to unblock a cluster during an
// outage (and what a bypass amounts to).
func setFailurePolicy(ctx context.Context, policy admissionregistrationv1.FailurePolicyType) error {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigurationName}, m); err != nil {
		return err
	}
	for i := range m.Webhooks {
		m.Webhooks[i].FailurePolicy = ptr.To(policy)
	}
	if err := admin.Update(ctx, m); err != nil {
		return err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, v); err != nil {
		return err
	}
	for i := range v.Webhooks {
		v.Webhooks[i].FailurePolicy = ptr.To(policy)
	}
	return admin.Update(ctx, v)
}

// TestWebhookUnavailable stops the only replica: a tenant's create fails
// with a message naming the webhook, nothing is stored, and Pods,
// Deployments, Secrets, other ConfigMaps and Namespaces are created as
// usual. Then the admin bypasses the webhooks (failurePolicy Ignore) and a
// tenant stores groups with a forged image, one without the provenance
// annotations, one with a boundaries hash copied from an admitted group
// and the controller's finalizer; when a replica serves again, the
// controller acts on neither before re-admitting it: no launch template
// version ever has the forged image, and both end Ready on the admin's.
func TestWebhookUnavailable(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	started := time.Now()
	opts := app.Options{AWS: ptr.To(environment.AWS.Copy()), PollInterval: time.Second, ResyncInterval: time.Minute,
		CloudChecks: true, GCPeriod: time.Hour, GCGrace: time.Hour}
	mgr, err := harness.StartManager(environment.Config, environment.Envtest.WebhookInstallOptions, opts)
	if err != nil {
		t.Fatal(err)
	}
	running := true
	defer func() {
		if running {
			_ = mgr.Stop()
		}
	}()
	data := cloud.Boundaries(cloud.AMIs[0], 5)
	if err := harness.SetBoundaries(ctx, admin, data); err != nil {
		t.Fatal(err)
	}
	cfg, err := boundaries.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, webhookNamespace)
	tenant := tenantClient(t, webhookNamespace, "webhook-tenant")

	// No replica serves.
	if err := mgr.Stop(); err != nil {
		t.Logf("manager stopped: %v", err)
	}
	running = false
	err = tenant.Create(ctx, shortGroup(webhookNamespace, "while-down", "t3.medium"))
	refusedClearly := err != nil && strings.Contains(err.Error(), `failed calling webhook "instancegroups.mutate.instancemgr.keikoproj.io"`)
	if err == nil {
		t.Errorf("a tenant's create was accepted with no webhook serving")
	} else {
		t.Logf("tenant create with no replica: %v", err)
		if !refusedClearly {
			t.Errorf("the refusal does not name instance-manager's webhook: %v", err)
		}
	}
	list := &v1alpha1.InstanceGroupList{}
	if err := admin.List(ctx, list, client.InNamespace(webhookNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d InstanceGroup(s) stored with no webhook serving", len(list.Items))
	}
	// The boundary ConfigMap is refused too, and says by whom.
	changed := map[string]string{}
	for k, v := range data {
		changed[k] = v
	}
	changed["rollout"] = "maxConcurrentUpgrades: 2\n"
	if err := harness.WriteBoundaries(ctx, admin, changed); err == nil || !strings.Contains(err.Error(), "boundaries.validate.instancemgr.keikoproj.io") {
		t.Errorf("the boundary ConfigMap write with no replica: %v; want a refusal naming its webhook", err)
	}
	// Everything else works.
	other := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNamespace + "-other"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: "app-config"}, Data: map[string]string{"a": "b"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ConfigNamespace, Name: "not-the-boundaries"}, Data: map[string]string{"a": "b"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: "app-secret"}, StringData: map[string]string{"a": "b"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: "app"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: "app"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}}},
	}
	blocked := 0
	for _, o := range other {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			blocked++
			t.Errorf("creating %T %s with no replica: %v", o, o.GetName(), err)
		}
	}
	defer func() {
		for _, o := range other {
			_ = admin.Delete(ctx, o)
		}
	}()

	// The admin bypasses the webhooks; a tenant stores groups that never
	// went through them.
	if err := setFailurePolicy(ctx, admissionregistrationv1.Ignore); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			if err := setFailurePolicy(ctx, admissionregistrationv1.Fail); err != nil {
				t.Errorf("restoring failurePolicy Fail: %v", err)
			}
			restored = true
		}
	}
	defer restore()
	forgedImage := cloud.AMIs[2]
	forged := func(name string) *v1alpha1.InstanceGroup {
		ig := shortGroup(webhookNamespace, name, "t3.medium")
		ig.Spec.Provisioner = v1alpha1.ProvisionerEKS
		ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate}
		c := ig.Spec.EKS.Configuration
		c.ClusterName, c.Image, c.Subnets, c.SecurityGroups = cloud.Cluster, forgedImage, cloud.Subnets, []string{cloud.SecurityGroup}
		return ig
	}
	unmerged := forged("unmerged")
	disguised := forged("disguised")
	disguised.Finalizers = []string{instancegroup.Finalizer}
	disguised.Annotations = map[string]string{v1alpha1.AnnotationBoundariesHash: cfg.Hash(false)} // as on any admitted group
	var bypassed []*v1alpha1.InstanceGroup
	for _, ig := range []*v1alpha1.InstanceGroup{unmerged, disguised} {
		deadline := time.Now().Add(harness.ConvergeTimeout) // the API server's webhook configuration cache catches up
		for {
			err := tenant.Create(ctx, ig.DeepCopy())
			if err == nil {
				bypassed = append(bypassed, ig)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("creating %s with the webhooks bypassed: %v", ig.Name, err)
			}
			time.Sleep(harness.PollInterval)
		}
	}
	defer func() {
		for _, ig := range bypassed {
			_ = admin.Delete(ctx, ig.DeepCopy())
		}
	}()
	for _, ig := range bypassed {
		stored := &v1alpha1.InstanceGroup{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), stored); err != nil {
			t.Fatal(err)
		}
		if stored.Spec.EKS.Configuration.Image != forgedImage {
			t.Fatalf("%s was stored with image %s; the bypass did not work", ig.Name, stored.Spec.EKS.Configuration.Image)
		}
	}

	// A replica serves again.
	restore()
	mgr, err = harness.StartManager(environment.Config, environment.Envtest.WebhookInstallOptions, opts)
	if err != nil {
		t.Fatal(err)
	}
	running = true
	keys := []string{key(unmerged), key(disguised)}
	pending := waitGroups(ctx, []string{webhookNamespace}, keys, 3*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		if img := ig.Spec.EKS.Configuration.Image; img != cloud.AMIs[0] {
			return false, "spec image " + img
		}
		return ready(ig)
	})
	notReadmitted := len(pending)
	if len(pending) > 0 {
		t.Errorf("groups stored without admission not re-admitted and Ready: %v", pending)
	}
	// The controller never acted on the forged spec: every version of
	// their launch templates has the admin's image.
	forgedVersions := 0
	for _, ig := range bypassed {
		stored := &v1alpha1.InstanceGroup{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), stored); err != nil {
			t.Fatal(err)
		}
		out, err := ec2.NewFromConfig(environment.AWS).DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
			LaunchTemplateName: aws.String(eks.GroupName(stored))})
		if err != nil {
			t.Errorf("launch template of %s: %v", ig.Name, err)
			continue
		}
		for _, v := range out.LaunchTemplateVersions {
			if img := aws.ToString(v.LaunchTemplateData.ImageId); img != cloud.AMIs[0] {
				forgedVersions++
				t.Errorf("%s: launch template version %d has image %s", ig.Name, aws.ToInt64(v.VersionNumber), img)
			}
		}
	}
	held := 0
	events := &eventsv1.EventList{}
	if err := admin.List(ctx, events, client.InNamespace(webhookNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == instancegroup.ReasonNotAdmitted {
			held++
			t.Logf("%s: %s", e.Regarding.Name, e.Note)
		}
	}
	if held == 0 {
		t.Logf("no %s Event: every bypassed group was re-admitted by the fan-out or its finalizer before the controller looked at it", instancegroup.ReasonNotAdmitted)
	}

	// Clean up: the groups' cloud resources go with them.
	for _, ig := range bypassed {
		if err := admin.Delete(ctx, ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	if pending := waitGroups(ctx, []string{webhookNamespace}, keys, 2*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		return ig == nil, "still there"
	}); len(pending) > 0 {
		t.Errorf("not deleted: %v", pending)
	}
	figure(t, "webhook_down_creates_refused_clearly", fmt.Sprintf("%d/1", map[bool]int{true: 1}[refusedClearly]))
	figure(t, "webhook_down_unmerged_groups_stored", len(list.Items))
	figure(t, "webhook_down_other_resources_blocked", fmt.Sprintf("%d/%d", blocked, len(other)))
	figure(t, "bypassed_groups_acted_on_unadmitted", forgedVersions)
	figure(t, "bypassed_groups_readmitted", fmt.Sprintf("%d/%d", len(bypassed)-notReadmitted, len(bypassed)))
	figure(t, "webhook_unavailable_seconds", int(time.Since(started).Seconds()))
}
