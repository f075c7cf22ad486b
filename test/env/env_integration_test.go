package env_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/test/env"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime's logger; without one set,
	// controller-runtime prints a warning with a stack trace.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// The apiserver-only environment authorizes with RBAC: an impersonated user
// has exactly the permissions bound to it, and the admin kubeconfig works.
func TestControlPlaneOnlyAuthorizesWithRBAC(t *testing.T) {
	e := env.Start(t, env.Options{})
	g := NewWithT(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(e.Config)

	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	aliceCfg := rest.CopyConfig(e.Config)
	aliceCfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"tenants"}}
	alice := kubernetes.NewForConfigOrDie(aliceCfg)

	_, err = alice.CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "alice has no binding yet, got %v", err)

	_, err = admin.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = admin.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-reads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func() error {
		_, err := alice.CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{})
		return err
	}).WithTimeout(60*time.Second).Should(Succeed(), "RBAC for alice in team-a takes effect")
	_, err = alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the binding is for team-a only, got %v", err)
	_, err = alice.CoreV1().ConfigMaps("team-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the role does not allow create, got %v", err)

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", e.Kubeconfig, "get", "namespace", "team-a", "-o", "name").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(strings.TrimSpace(string(out))).To(Equal("namespace/team-a"))
	}

	g.Expect(e.ResetAWS(ctx)).To(MatchError(ContainSubstring("without AWS")))
}

// CRDs from Options.CRDDirectoryPaths are served when Start returns, and the
// webhook configurations of Options.WebhookInstallOptions reach a webhook
// server the test runs in process on LocalServingHost:LocalServingPort with
// the certificates in LocalServingCertDir.
func TestCRDsAndWebhooksAreInstalled(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "test.instancemgr.io", Version: "v1", Resource: "widgets"}
	e := env.Start(t, env.Options{
		CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{{
				ObjectMeta: metav1.ObjectMeta{Name: "widget-policy"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{
					Name:                    "widgets.test.instancemgr.io",
					AdmissionReviewVersions: []string{"v1"},
					SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
					FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
					ClientConfig: admissionregistrationv1.WebhookClientConfig{
						Service: &admissionregistrationv1.ServiceReference{Name: "unused", Namespace: "unused", Path: ptr.To("validate-widget")},
					},
					Rules: []admissionregistrationv1.RuleWithOperations{{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{widgets.Group}, APIVersions: []string{widgets.Version}, Resources: []string{widgets.Resource}},
					}},
				}},
			}},
		},
	})
	g := NewWithT(t)
	ctx := t.Context()

	// The webhook refuses widgets named "bad".
	wh := e.Envtest.WebhookInstallOptions
	mux := http.NewServeMux()
	mux.HandleFunc("/validate-widget", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: review.Request.Name != "bad"}
		if !resp.Allowed {
			resp.Result = &metav1.Status{Message: "widgets may not be bad"}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	})
	listener, err := net.Listen("tcp", net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)))
	g.Expect(err).NotTo(HaveOccurred())
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		_ = server.ServeTLS(listener, filepath.Join(wh.LocalServingCertDir, "tls.crt"), filepath.Join(wh.LocalServingCertDir, "tls.key"))
	}()
	t.Cleanup(func() { _ = server.Close() })

	client := dynamic.NewForConfigOrDie(e.Config).Resource(widgets).Namespace("default")
	widget := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.instancemgr.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": int64(1)},
		}}
	}
	_, err = client.Create(ctx, widget("good"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.Create(ctx, widget("bad"), metav1.CreateOptions{})
	g.Expect(err).To(MatchError(ContainSubstring("widgets may not be bad")))
}

// userData is AL2-style user data whose kubelet registers the given labels
// and taints.
func userData(labels, taints string) string {
	script := fmt.Sprintf("#!/bin/bash\nset -o xtrace\n/etc/eks/bootstrap.sh test-cluster --kubelet-extra-args '--node-labels=%s --register-with-taints=%s'\n", labels, taints)
	return base64.StdEncoding.EncodeToString([]byte(script))
}

// createGroup creates a launch template with the user data and an Auto
// Scaling group of size instances from it in moto's default subnets, and
// returns the launch template id.
func createGroup(ctx context.Context, g Gomega, cfg aws.Config, name, userData string, size int32) string {
	ec2c := ec2.NewFromConfig(cfg)
	asg := autoscaling.NewFromConfig(cfg)
	subnets, err := ec2c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{
		Filters: []ec2types.Filter{{Name: aws.String("default-for-az"), Values: []string{"true"}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subnets.Subnets).NotTo(BeEmpty(), "moto has default subnets")
	var ids []string
	for _, s := range subnets.Subnets {
		ids = append(ids, aws.ToString(s.SubnetId))
	}
	lt, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:      aws.String("ami-12c6146b"),
			InstanceType: ec2types.InstanceTypeM5Large,
			UserData:     aws.String(userData),
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name),
		MinSize:              aws.Int32(0),
		MaxSize:              aws.Int32(size + 2),
		DesiredCapacity:      aws.Int32(size),
		LaunchTemplate: &asgtypes.LaunchTemplateSpecification{
			LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId,
			Version:          aws.String("$Latest"),
		},
		VPCZoneIdentifier: aws.String(strings.Join(ids, ",")),
	})
	g.Expect(err).NotTo(HaveOccurred())
	return aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
}

// An Auto Scaling group's instances become Ready Nodes with the labels and
// taints of their user data; a terminated instance's Node goes away, and
// ResetAWS removes the rest.
func TestBridgeTurnsGroupInstancesIntoNodes(t *testing.T) {
	const joinDelay = 3 * time.Second
	opts := env.AllComponents()
	opts.JoinDelay = joinDelay
	opts.BridgePollInterval = 250 * time.Millisecond
	e := env.Start(t, opts)
	g := NewWithT(t)
	ctx := t.Context()

	created := time.Now()
	createGroup(ctx, g, e.AWS, "web", userData("team=a,tier=web", "dedicated=web:NoSchedule,spot=:NoExecute"), 2)
	g.Expect(e.Bridge.Sync(ctx)).To(Succeed())
	early, err := e.Bridge.Nodes(ctx, "web")
	g.Expect(err).NotTo(HaveOccurred())
	if time.Since(created) < joinDelay {
		g.Expect(early).To(BeEmpty(), "no Node before the join delay has passed")
	}

	var nodes []corev1.Node
	g.Eventually(func(g Gomega) {
		nodes, err = e.Bridge.Nodes(ctx, "web")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(2))
		for _, n := range nodes {
			g.Expect(env.NodeIsReady(&n)).To(BeTrue(), "node %s ready", n.Name)
			// The node lifecycle controller's not-ready taint is gone; only
			// the user data's taints remain.
			g.Expect(n.Spec.Taints).To(ConsistOf(
				corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "spot", Effect: corev1.TaintEffectNoExecute},
			))
		}
	}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	out, err := autoscaling.NewFromConfig(e.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"web"}})
	g.Expect(err).NotTo(HaveOccurred())
	var instanceIDs []string
	for _, i := range out.AutoScalingGroups[0].Instances {
		instanceIDs = append(instanceIDs, aws.ToString(i.InstanceId))
	}
	desc, err := ec2.NewFromConfig(e.AWS).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: instanceIDs})
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]ec2types.Instance{}
	for _, r := range desc.Reservations {
		for _, i := range r.Instances {
			byName[aws.ToString(i.PrivateDnsName)] = i
		}
	}
	for _, n := range nodes {
		inst, ok := byName[n.Name]
		g.Expect(ok).To(BeTrue(), "node %s is named after an instance's private DNS name", n.Name)
		zone := aws.ToString(inst.Placement.AvailabilityZone)
		g.Expect(n.Spec.ProviderID).To(Equal("aws:///" + zone + "/" + aws.ToString(inst.InstanceId)))
		g.Expect(n.Labels).To(HaveKeyWithValue("team", "a"))
		g.Expect(n.Labels).To(HaveKeyWithValue("tier", "web"))
		g.Expect(n.Labels).To(HaveKeyWithValue("kubernetes.io/hostname", n.Name))
		g.Expect(n.Labels).To(HaveKeyWithValue("kubernetes.io/os", "linux"))
		g.Expect(n.Labels).To(HaveKeyWithValue("kubernetes.io/arch", "amd64"))
		g.Expect(n.Labels).To(HaveKeyWithValue("node.kubernetes.io/instance-type", "m5.large"))
		g.Expect(n.Labels).To(HaveKeyWithValue("topology.kubernetes.io/zone", zone))
		g.Expect(n.Labels).To(HaveKeyWithValue("topology.kubernetes.io/region", env.AWSRegion))
		g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: aws.ToString(inst.PrivateIpAddress)}))
	}

	// Terminating one instance removes its Node; the other stays.
	gone := nodes[0]
	_, err = autoscaling.NewFromConfig(e.AWS).TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId:                     aws.String(gone.Annotations[env.BridgeInstanceAnnotation]),
		ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		_, err := e.Bridge.Nodes(ctx, "web")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = kubernetes.NewForConfigOrDie(e.Config).CoreV1().Nodes().Get(ctx, gone.Name, metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "node %s of the terminated instance is deleted, got %v", gone.Name, err)
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	left, err := e.Bridge.Nodes(ctx, "web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(HaveLen(1))
	g.Expect(left[0].Name).To(Equal(nodes[1].Name))

	// ResetAWS returns only once the bridge removed the Nodes of the
	// instances moto forgot.
	g.Expect(e.ResetAWS(ctx)).To(Succeed())
	left, err = e.Bridge.Nodes(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
}

// An instance a kubelet would not start on (a --node-labels label in the
// kubernetes.io namespace that kubelets refuse) never joins, and Sync says
// why; an instance launched on its own from a launch template and then
// attached to a group joins with the labels of its user data.
func TestBridgeJoinsAttachedInstancesAndRefusesWhatKubeletsRefuse(t *testing.T) {
	e := env.Start(t, env.Options{Bridge: true, BridgePollInterval: 250 * time.Millisecond})
	g := NewWithT(t)
	ctx := t.Context()

	createGroup(ctx, g, e.AWS, "refused", userData("node-role.kubernetes.io/worker=,team=c", "x=y:NoSchedule"), 1)
	lt := createGroup(ctx, g, e.AWS, "attached", userData("source=launch-template", "from=template:NoSchedule"), 0)
	ec2c := ec2.NewFromConfig(e.AWS)
	run, err := ec2c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String(lt), Version: aws.String("1")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	instanceID := aws.ToString(run.Instances[0].InstanceId)
	_, err = autoscaling.NewFromConfig(e.AWS).AttachInstances(ctx, &autoscaling.AttachInstancesInput{
		AutoScalingGroupName: aws.String("attached"), InstanceIds: []string{instanceID},
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func(g Gomega) {
		nodes, err := e.Bridge.Nodes(ctx, "attached")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(1))
		g.Expect(nodes[0].Annotations).To(HaveKeyWithValue(env.BridgeInstanceAnnotation, instanceID))
		g.Expect(nodes[0].Labels).To(HaveKeyWithValue("source", "launch-template"))
		g.Expect(nodes[0].Spec.Taints).To(ConsistOf(corev1.Taint{Key: "from", Value: "template", Effect: corev1.TaintEffectNoSchedule}))
		g.Expect(env.NodeIsReady(&nodes[0])).To(BeTrue())
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	err = e.Bridge.Sync(ctx)
	g.Expect(err).To(MatchError(And(ContainSubstring("kubelet refuses"), ContainSubstring("node-role.kubernetes.io/worker"))))
	refused, err := e.Bridge.Nodes(ctx, "refused")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused).To(BeEmpty())
}

// The environment proof: pods of a Deployment run on bridge Nodes, and a
// PodDisruptionBudget is honoured by the Eviction API: one eviction is
// accepted, the next is refused with 429 until the Deployment has replaced
// the evicted pod.
func TestEvictionHonoursPodDisruptionBudget(t *testing.T) {
	e := env.Start(t, env.AllComponents())
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(e.Config)

	createGroup(ctx, g, e.AWS, "workers", userData("team=b", "dedicated=workers:NoSchedule"), 3)
	groupNodes, err := e.Bridge.WaitForReadyNodes(ctxWithTimeout(t, 60*time.Second), "workers", 3)
	g.Expect(err).NotTo(HaveOccurred())
	var nodeNames []string
	for _, n := range groupNodes {
		nodeNames = append(nodeNames, n.Name)
	}

	const ns = "shop"
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	labels := map[string]string{"app": "web"}
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"team": "b"},
					Tolerations: []corev1.Toleration{{
						Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "workers", Effect: corev1.TaintEffectNoSchedule,
					}},
					Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	runningPods := func(g Gomega) []corev1.Pod {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		g.Expect(err).NotTo(HaveOccurred())
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				running = append(running, p)
			}
		}
		return running
	}
	waitForBudget := func() []corev1.Pod {
		var pods []corev1.Pod
		g.Eventually(func(g Gomega) {
			pods = runningPods(g)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(nodeNames).To(ContainElement(p.Spec.NodeName), "pod %s runs on a bridge node", p.Name)
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			}
			pdb, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
			g.Expect(pdb.Status.CurrentHealthy).To(BeEquivalentTo(3))
			g.Expect(pdb.Status.DesiredHealthy).To(BeEquivalentTo(2))
			g.Expect(pdb.Status.DisruptionsAllowed).To(BeEquivalentTo(1))
		}).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		return pods
	}
	evict := func(p corev1.Pod) error {
		return kube.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}})
	}

	// While the nodes are cordoned, an evicted pod's replacement cannot
	// become healthy, so the budget stays used up between the two
	// evictions however slowly they run.
	setUnschedulable := func(v bool) {
		for _, name := range nodeNames {
			patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v))
			_, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	pods := waitForBudget()
	setUnschedulable(true)
	evicted := pods[0]
	g.Expect(evict(evicted)).To(Succeed(), "the budget allows one disruption")
	err = evict(pods[1])
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the budget is used up, want 429 TooManyRequests, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("disruption budget"))
	setUnschedulable(false)

	// The evicted pod is gone and replaced; the budget allows one eviction again.
	pods = waitForBudget()
	g.Expect(slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.UID == evicted.UID })).To(BeFalse(), "evicted pod %s is gone", evicted.Name)
	g.Expect(evict(pods[1])).To(Succeed())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ctxWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
