// Package dryrun runs instance-manager with --dry-run against the local
// control plane and moto: it changes nothing in either, and what it records
// is what a real run then does.
package dryrun

import (
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
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/dryrun"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// startManager starts the manager with its AWS calls recorded by rec;
// dry-run managers pass observe.
func startManager(t *testing.T, e *env.Environment, rec *env.AWSRecorder, observe func(string)) *harness.Manager {
	t.Helper()
	cfg := rec.Config(e.AWS)
	m, err := harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{
		AWS: &cfg, Workers: 2, PollInterval: time.Second, ResyncInterval: 5 * time.Second,
		GCPeriod: time.Hour, GCGrace: time.Hour, DryRun: observe != nil, DryRunObserve: observe,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writes are the distinct mutating operations among calls, sorted.
func writes(calls []env.AWSCall) []string {
	var out []string
	for _, c := range calls {
		if c.Status < 300 && !strings.HasPrefix(c.Action, "Describe") && !strings.HasPrefix(c.Action, "List") &&
			!strings.HasPrefix(c.Action, "Get") && !strings.HasPrefix(c.Action, "GET ") && !slices.Contains(out, c.Action) {
			out = append(out, c.Action)
		}
	}
	slices.Sort(out)
	return out
}

// A dry run over a group whose spec changed (maxSize, a tag, metrics
// collection) records the Auto Scaling writes, log line and "would …"
// Event, makes none of them in moto and stores nothing in the API server;
// a real run then makes exactly the writes recorded.
func TestDryRunRecordsWhatARealRunThenDoes(t *testing.T) {
	if os.Getenv(env.BinDirEnv) == "" {
		t.Skip("needs the local environment: run make test")
	}
	g := NewWithT(t)
	ctx := context.Background()
	opts := env.Options{AWS: true, CRDDirectoryPaths: []string{harness.CRDPath()}, WebhookInstallOptions: harness.WebhookOptions()}
	e := env.Start(t, opts)
	admin, err := client.New(e.Config, client.Options{Scheme: app.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(harness.EnsureConfigNamespace(ctx, admin)).To(Succeed())
	cloud, err := harness.NewCloud(ctx, e.AWS, "dry", "10.2.0.0/16")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dry"}})).To(Succeed())

	// A real run creates the group (minSize 0: no instances, no nodes).
	first, err := e.NewAWSRecorder("instance-manager")
	g.Expect(err).NotTo(HaveOccurred())
	m := startManager(t, e, first, nil)
	g.Expect(harness.SetBoundaries(ctx, admin, cloud.Boundaries(cloud.AMIs[0], 5))).To(Succeed())
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "dry", Name: "nodes"},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{MinSize: 0, MaxSize: 2,
			Configuration: &v1alpha1.EKSConfiguration{InstanceType: "t3.medium"}}}}
	g.Expect(admin.Create(ctx, ig)).To(Succeed())
	var ready *v1alpha1.InstanceGroup
	g.Eventually(func() string {
		ready = &v1alpha1.InstanceGroup{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ig), ready)).To(Succeed())
		return ready.Status.CurrentState
	}, 2*time.Minute, 500*time.Millisecond).Should(Equal(v1alpha1.StateReady))
	g.Expect(m.Stop()).To(Succeed())
	group := ready.Status.ActiveScalingGroupName
	asgOf := func() *autoscaling.DescribeAutoScalingGroupsOutput {
		out, err := autoscaling.NewFromConfig(e.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.AutoScalingGroups).To(HaveLen(1))
		return out
	}
	before := asgOf().AutoScalingGroups[0]

	// The dry run.
	var mu sync.Mutex
	var recorded []string
	dryCalls, err := e.NewAWSRecorder("instance-manager --dry-run")
	g.Expect(err).NotTo(HaveOccurred())
	m = startManager(t, e, dryCalls, func(call string) {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, call)
	})
	g.Eventually(func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.EKS.MaxSize = 3
		cur.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "team", "value": "dry"}}
		cur.Spec.EKS.Configuration.MetricsCollection = []string{"GroupDesiredCapacity"}
		return admin.Patch(ctx, cur, patch) // the dry-run manager's webhooks admit it once loaded
	}, harness.ConvergeTimeout, time.Second).Should(Succeed())
	changed := &v1alpha1.InstanceGroup{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ig), changed)).To(Succeed())
	awsWrites := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, c := range recorded {
			if f := strings.Fields(c); len(f) >= 2 && (f[0] == "autoscaling" || f[0] == "ec2" || f[0] == "iam" || f[0] == "eks") && !slices.Contains(out, f[1]) {
				out = append(out, f[1])
			}
		}
		slices.Sort(out)
		return out
	}
	g.Eventually(awsWrites, time.Minute, time.Second).Should(ContainElements("UpdateAutoScalingGroup", "CreateOrUpdateTags", "EnableMetricsCollection"))
	g.Consistently(func() []string { return writes(dryCalls.Calls()) }, 5*time.Second, time.Second).Should(BeEmpty(), "no write reached moto")
	g.Expect(len(dryCalls.Calls())).To(BeNumerically(">", 0), "reads are real")
	after := asgOf().AutoScalingGroups[0]
	g.Expect(aws.ToInt32(after.MaxSize)).To(Equal(aws.ToInt32(before.MaxSize)), "moto unchanged")
	g.Expect(after.Tags).To(HaveLen(len(before.Tags)))
	g.Expect(after.EnabledMetrics).To(BeEmpty())
	stored := &v1alpha1.InstanceGroup{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ig), stored)).To(Succeed())
	g.Expect(stored.Status.ObservedGeneration).To(Equal(ready.Status.ObservedGeneration), "no status stored")
	g.Expect(stored.ResourceVersion).To(Equal(changed.ResourceVersion), "nothing stored in the API server")
	events := &eventsv1.EventList{}
	g.Expect(admin.List(ctx, events, client.InNamespace("dry"))).To(Succeed())
	var would []string
	for _, ev := range events.Items {
		if ev.Reason == dryrun.EventReason && ev.Regarding.Name == ig.Name {
			would = append(would, ev.Note)
		}
	}
	// Events about one object are rate-limited and merged by the event
	// recorder: at least one "would …" Event is there (the log has them all).
	g.Expect(would).To(ContainElement(MatchRegexp(`^would autoscaling (UpdateAutoScalingGroup|CreateOrUpdateTags|EnableMetricsCollection) `)))
	g.Expect(m.Stop()).To(Succeed())
	dryRecorded := awsWrites()
	t.Logf("the dry run recorded %v", dryRecorded)

	// The real run makes exactly those writes.
	second, err := e.NewAWSRecorder("instance-manager")
	g.Expect(err).NotTo(HaveOccurred())
	m = startManager(t, e, second, nil)
	defer func() { _ = m.Stop() }()
	g.Eventually(func() string {
		cur := &v1alpha1.InstanceGroup{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s generation %d observed %d", cur.Status.CurrentState, cur.Generation, cur.Status.ObservedGeneration)
	}, 2*time.Minute, 500*time.Millisecond).Should(Equal(fmt.Sprintf("%s generation %d observed %d", v1alpha1.StateReady, changed.Generation, changed.Generation)))
	g.Expect(aws.ToInt32(asgOf().AutoScalingGroups[0].MaxSize)).To(BeEquivalentTo(3))
	g.Expect(writes(second.Calls())).To(Equal(dryRecorded), "the real run made the writes the dry run recorded")

	g.Expect(admin.Delete(ctx, ig)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(ig), &v1alpha1.InstanceGroup{}))
	}, 2*time.Minute, time.Second).Should(BeTrue())
}
