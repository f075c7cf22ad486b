package autoscaling

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

func namespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// scaledGroup is an InstanceGroup the cluster-autoscaler scales: annotated
// so that instance-manager puts the discovery and node template tags on
// its Auto Scaling group.
func scaledGroup(ns, name string, min, max int64, labels map[string]string, taints ...corev1.Taint) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{v1alpha1.AnnotationClusterAutoscalerEnabled: "true"}},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{
			MinSize: min, MaxSize: max,
			Configuration: &v1alpha1.EKSConfiguration{InstanceType: "t3.medium", Labels: labels, Taints: taints},
		}},
	}
}

// create submits ig and deletes it when the test ends.
func create(t *testing.T, ig *v1alpha1.InstanceGroup) {
	t.Helper()
	if err := admin.Create(context.Background(), ig); err != nil {
		t.Fatalf("creating InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	t.Cleanup(func() {
		if err := admin.Delete(context.Background(), ig.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
		}
	})
}

func get(t *testing.T, ig *v1alpha1.InstanceGroup) *v1alpha1.InstanceGroup {
	t.Helper()
	out := &v1alpha1.InstanceGroup{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(ig), out); err != nil {
		t.Fatalf("getting InstanceGroup %s/%s: %v", ig.Namespace, ig.Name, err)
	}
	return out
}

// waitReady waits until the group is Ready for its current spec.
func waitReady(t *testing.T, ig *v1alpha1.InstanceGroup, timeout time.Duration) *v1alpha1.InstanceGroup {
	t.Helper()
	return harness.WaitReady(t, admin, ig, timeout)
}

// groupNodes lists the nodes registered for the group.
func groupNodes(t *testing.T, ig *v1alpha1.InstanceGroup) []corev1.Node {
	t.Helper()
	return harness.GroupNodes(t, admin, ig)
}

// asg describes the group's Auto Scaling group in moto.
func asg(t *testing.T, name string) (desired, min, max int32, instances int) {
	t.Helper()
	out, err := autoscaling.NewFromConfig(environment.AWS).DescribeAutoScalingGroups(context.Background(),
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups %s: %v", name, err)
	}
	if len(out.AutoScalingGroups) != 1 {
		t.Fatalf("Auto Scaling group %s: %d found", name, len(out.AutoScalingGroups))
	}
	g := out.AutoScalingGroups[0]
	return aws.ToInt32(g.DesiredCapacity), aws.ToInt32(g.MinSize), aws.ToInt32(g.MaxSize), len(g.Instances)
}

func desired(t *testing.T, name string) int32 {
	d, _, _, _ := asg(t, name)
	return d
}

// startAutoscaler starts a cluster-autoscaler for the fixture's cluster
// whose AWS calls are recorded, and stops it when the test ends (logging
// the end of its log if the test failed).
func startAutoscaler(t *testing.T, opts env.AutoscalerOptions) (*env.ClusterAutoscaler, *env.AWSRecorder) {
	t.Helper()
	rec, err := environment.NewAWSRecorder("cluster-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	opts.ClusterName, opts.Endpoint = cluster, rec.URL
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := time.Now()
	ca, err := environment.StartClusterAutoscaler(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster-autoscaler up in %s (log %s)", time.Since(started).Round(time.Millisecond), ca.LogPath)
	t.Cleanup(func() {
		ca.Stop()
		if t.Failed() {
			lines := strings.Split(strings.TrimSpace(ca.Log()), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("--- last lines of the cluster-autoscaler's log ---\n%s", strings.Join(lines, "\n"))
		}
	})
	return ca, rec
}

// capacityWrite is a call that changed (or could change) an Auto Scaling
// group's desired capacity.
type capacityWrite struct {
	At     time.Time
	Client string
	Action string
	Group  string // empty for an instance termination (the instance is named)
	Value  string // the desired capacity set, or the instance terminated with a decrement
}

func (w capacityWrite) String() string {
	return fmt.Sprintf("%s %s %s %s=%s", w.At.Format("15:04:05.000"), w.Client, w.Action, w.Group, w.Value)
}

// capacityWrites returns the calls in calls that set a desired capacity
// (SetDesiredCapacity, UpdateAutoScalingGroup or CreateAutoScalingGroup
// with DesiredCapacity, TerminateInstanceInAutoScalingGroup with a
// decrement), oldest first.
func capacityWrites(calls ...[]env.AWSCall) []capacityWrite {
	var out []capacityWrite
	for _, list := range calls {
		for _, c := range list {
			if c.Status >= 300 {
				continue
			}
			switch c.Action {
			case "SetDesiredCapacity", "UpdateAutoScalingGroup", "CreateAutoScalingGroup":
				if v := c.Params.Get("DesiredCapacity"); v != "" {
					out = append(out, capacityWrite{c.Time, c.Client, c.Action, c.Params.Get("AutoScalingGroupName"), v})
				}
			case "TerminateInstanceInAutoScalingGroup":
				if c.Params.Get("ShouldDecrementDesiredCapacity") == "true" {
					out = append(out, capacityWrite{c.Time, c.Client, c.Action, "", "-1 (" + c.Params.Get("InstanceId") + ")"})
				}
			}
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].At.Before(out[j-1].At); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// workload runs replicas pods, each requesting cpu and 5Gi of ephemeral
// storage, on nodes with labels that tolerate tolerations.
func workload(t *testing.T, ns, name string, replicas int32, cpu string, nodeSelector map[string]string, tolerations ...corev1.Toleration) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Tolerations:  tolerations,
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:              resource.MustParse(cpu),
							corev1.ResourceMemory:           resource.MustParse("256Mi"),
							corev1.ResourceEphemeralStorage: resource.MustParse("5Gi"),
						}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
	if err := admin.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), d) })
	return d
}

// pods counts the deployment's pods by phase, and how many are bound to a
// node.
func pods(t *testing.T, d *appsv1.Deployment) (running, pending int) {
	t.Helper()
	list := &corev1.PodList{}
	if err := admin.List(context.Background(), list, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			running++
		case corev1.PodPending:
			pending++
		}
	}
	return running, pending
}

// rotatedAndRunning returns "done" once ig runs launch template version 2 on every
// instance, is Ready with Upgrading False, and d has want pods running and
// none pending; otherwise what it sees.
func rotatedAndRunning(t *testing.T, ig *v1alpha1.InstanceGroup, d *appsv1.Deployment, want int) string {
	t.Helper()
	st := get(t, ig)
	running, pending := pods(t, d)
	upgrading := ""
	for _, c := range st.Status.Conditions {
		if c.Type == v1alpha1.ConditionUpgrading {
			upgrading = string(c.Status)
		}
	}
	if st.Status.LatestTemplateVersion == "2" && st.Status.NodesUpdated == st.Status.NodesTotal && upgrading == "False" &&
		st.Status.CurrentState == v1alpha1.StateReady && running == want && pending == 0 {
		return "done"
	}
	return fmt.Sprintf("%s, upgrading=%s, %d of %d updated, pods running %d pending %d",
		st.Status.CurrentState, upgrading, st.Status.NodesUpdated, st.Status.NodesTotal, running, pending)
}
