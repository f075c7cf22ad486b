package install_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/install"
)

// previousChart is the packaged chart of the previous release (0.1.0, as
// `helm package` made it before this release changed the CRD).
var previousChart = filepath.Join("testdata", "instance-manager-0.1.0.tgz")

// TestHelmUpgradeFromPreviousChart upgrades a release of the previous
// chart, with a tenant's InstanceGroup built and Ready, to this checkout's
// chart the way docs/install.md says: the new CRDs applied first (server-side,
// as `kubectl apply --server-side --force-conflicts` does), then `helm
// upgrade` with the same values, then the replicas replaced. The group
// must stay readable with its spec intact, the new CRD must be in force
// (its new printer columns), and the new replica must reconcile the group:
// Ready again, and a change made after the upgrade reaches AWS.
//
// Both replicas run the image `make image` built: what changes here is the
// chart and its CRD.
func TestHelmUpgradeFromPreviousChart(t *testing.T) {
	if _, err := install.Helm(); err != nil {
		if err == env.ErrNoEnvironment {
			t.Skip("needs the local environment and bin/helm: run make test")
		}
		t.Fatal(err)
	}
	e := env.Start(t, env.Options{AWS: true})
	ctx := t.Context()
	logs := &capturingWriter{t: t}
	t.Cleanup(logs.close)
	admin, err := client.New(e.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	cloud, values := exampleValues(t, e)

	// The previous release, with a group built by its replica, and the
	// values it knows: its schema refuses networkPolicy (on by default
	// since, with the API server's addresses required) and
	// boundaryConfigMap.quotas (quotas on by default since; the example
	// writes them out). The upgrade brings them, as docs/install.md says.
	oldValues := maps.Clone(values)
	delete(oldValues, "networkPolicy")
	oldCM := maps.Clone(values["boundaryConfigMap"].(map[string]any))
	delete(oldCM, "quotas")
	oldValues["boundaryConfigMap"] = oldCM
	old, err := install.InstallChart(ctx, e, previousChart, oldValues)
	if err != nil {
		t.Fatal(err)
	}
	if got := old.Deployment.Labels["helm.sh/chart"]; got != "instance-manager-0.1.0" {
		t.Fatalf("the fixture installed chart %q, want instance-manager-0.1.0", got)
	}
	oldColumns := printerColumns(t, admin)
	if slices.Contains(oldColumns, "Nodes") {
		t.Fatalf("the previous chart's CRD already has the Nodes column (%v): the fixture does not exercise a CRD change", oldColumns)
	}
	// The previous release's image kept upgrade slots in memory when its
	// chart granted no Lease rights; this image refuses to be ready without
	// them (readiness check upgrade-slots). The replica here runs this
	// image, so it gets them out of band, standing in for the old image.
	grantSlotLeases(t, admin, old)
	replica, err := install.StartManager(ctx, e, old, install.ManagerOptions{Dir: t.TempDir(), LogWriter: logs})
	if err != nil {
		t.Fatalf("the previous release's replica: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = replica.Stop()
		}
	})
	tenant, ig := exampleTenant(t, e)
	// No instances: what is upgraded here is the chart, not the nodes.
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 2
	if err := tenant.Client.Create(ctx, ig); err != nil {
		t.Fatalf("the tenant creating %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	before := waitForGroup(t, tenant.Client, ig, 3*time.Minute, readyAtMax(2), "Ready under the previous release")

	// The upgrade: CRDs first, then helm upgrade, then the new replica.
	crds, err := install.ApplyCRDs(ctx, e.Config, install.CRDDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied CRDs %v", crds)
	if cols := printerColumns(t, admin); !slices.Contains(cols, "Nodes") || !slices.Contains(cols, "Updated") {
		t.Errorf("after the CRD step the printer columns are %v, want Nodes and Updated added", cols)
	}
	values["clusterName"] = cloud.Cluster // a value the previous chart did not have
	rel, err := install.Upgrade(ctx, e, install.ChartDir(), values)
	if err != nil {
		t.Fatal(err)
	}
	version := versionFile(t)
	if got := rel.Deployment.Labels["helm.sh/chart"]; got != "instance-manager-"+version {
		t.Errorf("after helm upgrade the release is chart %q, want instance-manager-%s", got, version)
	}
	stopped = true
	if err := replica.Stop(); err != nil {
		t.Errorf("the previous release's replica: %v", err)
	}
	replica, err = install.StartManager(ctx, e, rel, install.ManagerOptions{Dir: t.TempDir(), LogWriter: logs})
	if err != nil {
		t.Fatalf("the upgraded release's replica: %v", err)
	}
	stopped = false

	// Readable, unchanged, and reconciled by the new replica.
	after := &v1alpha1.InstanceGroup{}
	if err := tenant.Client.Get(ctx, client.ObjectKeyFromObject(ig), after); err != nil {
		t.Fatalf("the tenant reading %s/%s after the upgrade: %v", ig.Namespace, ig.Name, err)
	}
	if after.Generation != before.Generation || after.Spec.EKS.Configuration.Image != before.Spec.EKS.Configuration.Image ||
		after.Annotations[v1alpha1.AnnotationSubmittedSpec] != before.Annotations[v1alpha1.AnnotationSubmittedSpec] {
		t.Errorf("the upgrade changed the group: generation %d -> %d, image %s -> %s", before.Generation, after.Generation,
			before.Spec.EKS.Configuration.Image, after.Spec.EKS.Configuration.Image)
	}
	after.Spec.EKS.MaxSize = 3
	if err := tenant.Client.Update(ctx, after); err != nil {
		t.Fatalf("the tenant raising maxSize after the upgrade: %v", err)
	}
	ready := waitForGroup(t, tenant.Client, ig, 3*time.Minute, readyAtMax(3), "Ready with maxSize 3 under the upgraded release")
	groups, err := autoscaling.NewFromConfig(e.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{ready.Status.ActiveScalingGroupName}})
	if err != nil || len(groups.AutoScalingGroups) != 1 {
		t.Fatalf("Auto Scaling group %s: %v", ready.Status.ActiveScalingGroupName, err)
	}
	if got := aws.ToInt32(groups.AutoScalingGroups[0].MaxSize); got != 3 {
		t.Errorf("the Auto Scaling group's MaxSize is %d after the upgraded replica reconciled maxSize 3", got)
	}

	if err := tenant.Client.Delete(ctx, ig); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the InstanceGroup to be deleted by the upgraded replica", func() bool {
		return apierrors.IsNotFound(tenant.Client.Get(context.Background(), client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{}))
	})
	if line := logs.find("forbidden"); line != "" {
		t.Errorf("the API server refused a replica something under the chart's RBAC:\n%s", line)
	}
}

// readyAtMax is true once the group is Ready with maxSize max applied.
func readyAtMax(max int) func(*v1alpha1.InstanceGroup) bool {
	return func(ig *v1alpha1.InstanceGroup) bool {
		return ig.Status.CurrentState == v1alpha1.StateReady && conditionTrue(ig, v1alpha1.ConditionReady) &&
			ig.Status.CurrentMax == max && ig.Status.ObservedGeneration == ig.Generation
	}
}

// versionFile returns the release version of this checkout (VERSION).
func versionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(install.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// printerColumns returns the names of the InstanceGroup CRD's printer
// columns as the API server has them.
func printerColumns(t *testing.T, c client.Client) []string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "instancegroups." + v1alpha1.GroupVersion.Group}, crd); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range crd.Spec.Versions {
		for _, col := range v.AdditionalPrinterColumns {
			names = append(names, col.Name)
		}
	}
	return names
}

// grantSlotLeases lets the release's service account keep the upgrade slot
// Leases in its namespace (what the current chart's Role grants).
func grantSlotLeases(t *testing.T, admin client.Client, r *install.Release) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: r.Namespace, Name: "test-upgrade-slot-leases"}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "list", "update", "delete"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: r.Namespace, Name: r.ServiceAccount()}}}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("granting the previous release's replica the slot Leases: %v", err)
		}
	}
}
