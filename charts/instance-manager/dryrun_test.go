package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/instancemgr/instance-manager/test/env"
)

// renderingCase is one value set: what it renders must pass the common
// checks, its own checks, and a server-side dry run.
type renderingCase struct {
	name  string
	r     release
	check func(t *testing.T, r rendering)
}

func renderingCases(t *testing.T) []renderingCase {
	boundaryWithNS := boundaryValues(t)
	boundaryWithNS["configNamespace"] = "im-config"
	const roleARN = "arn:aws:iam::111122223333:role/instance-manager"

	return []renderingCase{{
		name: "defaults",
		r:    release{Namespace: "im-system"},
		check: func(t *testing.T, r rendering) {
			d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
			if *d.Spec.Replicas != 2 {
				t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
			}
			pdb := typed[policyv1.PodDisruptionBudget](t, r.one(t, "PodDisruptionBudget"))
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
			}
			if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Error("the PodDisruptionBudget does not select the manager pods")
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			sc := c.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container securityContext %+v: want non-root, read-only root fs, no privilege escalation, drop ALL", sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
			}
			hostSpread := slices.IndexFunc(pod.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
				return c.TopologyKey == "kubernetes.io/hostname" && c.LabelSelector != nil && selects(c.LabelSelector.MatchLabels, d.Spec.Template.Labels)
			})
			if hostSpread < 0 {
				t.Errorf("no topology spread of the manager pods across nodes: %+v", pod.TopologySpreadConstraints)
			}
			if hasEnv(c, "AWS_REGION") {
				t.Error("AWS_REGION is set without awsRegion")
			}
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap", "Issuer", "Certificate"} {
				if objs := r.all(kind); len(objs) > 0 {
					t.Errorf("the default rendering has a %s", kind)
				}
			}
			if r.find("Role", "instance-manager-aws-auth") == nil {
				t.Error("no aws-auth Role by default")
			}
		},
	}, {
		name: "cert-manager",
		r:    release{Namespace: "im-system", Values: map[string]any{"certManager": map[string]any{"enabled": true}}},
		check: func(t *testing.T, r rendering) {
			issuer := r.one(t, "Issuer")
			if _, ok := issuer.Object["spec"].(map[string]any)["selfSigned"]; !ok {
				t.Errorf("the Issuer is not self-signed: %v", issuer.Object["spec"])
			}
			cert := r.one(t, "Certificate")
			kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
			name, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
			if kind != "Issuer" || name != issuer.GetName() {
				t.Errorf("the Certificate is issued by %s %s, want Issuer %s", kind, name, issuer.GetName())
			}
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			svc := webhookService(t, r)
			if want := svc.Name + ".im-system.svc"; !slices.Contains(dnsNames, want) {
				t.Errorf("the Certificate's dnsNames %v lack %s", dnsNames, want)
			}
			if len(r.all("Secret")) > 0 {
				t.Error("a Secret is rendered with cert-manager")
			}
			if rotatorRBAC(t, r) {
				t.Error("the certificate rotation's RBAC is rendered with cert-manager")
			}
		},
	}, {
		name: "cert-manager with an existing issuer",
		r: release{Namespace: "im-system", Values: map[string]any{"certManager": map[string]any{
			"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"},
		}}},
		check: func(t *testing.T, r rendering) {
			if len(r.all("Issuer")) > 0 {
				t.Error("an Issuer is rendered although issuerRef names one")
			}
			ref, _, _ := unstructured.NestedStringMap(r.one(t, "Certificate").Object, "spec", "issuerRef")
			if ref["kind"] != "ClusterIssuer" || ref["name"] != "corp-ca" || ref["group"] != "cert-manager.io" {
				t.Errorf("the Certificate's issuerRef is %v", ref)
			}
		},
	}, {
		name: "service monitor",
		r: release{Namespace: "im-system", Values: map[string]any{"serviceMonitor": map[string]any{
			"enabled": true, "labels": map[string]any{"release": "prometheus"}, "interval": "30s",
		}}},
		check: func(t *testing.T, r rendering) {
			sm := r.one(t, "ServiceMonitor")
			if sm.GetLabels()["release"] != "prometheus" {
				t.Errorf("ServiceMonitor labels %v lack release=prometheus", sm.GetLabels())
			}
			selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			var selected []*corev1.Service
			for _, o := range r.all("Service") {
				if s := typed[corev1.Service](t, o); selects(selector, s.Labels) {
					selected = append(selected, s)
				}
			}
			if len(selected) != 1 || len(selected[0].Spec.Ports) != 1 || selected[0].Spec.Ports[0].Name != "metrics" || selected[0].Spec.Ports[0].Port != 8080 {
				t.Fatalf("the ServiceMonitor selects %d Services, want the metrics Service alone", len(selected))
			}
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints %v", endpoints)
			}
			ep := endpoints[0].(map[string]any)
			if ep["port"] != "metrics" || ep["path"] != "/metrics" || ep["interval"] != "30s" {
				t.Errorf("ServiceMonitor endpoint %v, want port metrics, path /metrics, interval 30s", ep)
			}
		},
	}, {
		name: "boundary ConfigMap in another namespace",
		r:    release{Namespace: "im-system", Values: boundaryWithNS},
		check: func(t *testing.T, r rendering) {
			cm := r.one(t, "ConfigMap")
			if cm.GetNamespace() != "im-config" {
				t.Errorf("ConfigMap namespace %q, want im-config", cm.GetNamespace())
			}
			role := r.find("Role", "instance-manager-boundaries")
			if role == nil || role.GetNamespace() != "im-config" {
				t.Fatalf("no Role for the boundary ConfigMap in im-config")
			}
		},
	}, {
		name: "IRSA",
		r: release{Namespace: "im-system", Values: map[string]any{
			"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": roleARN}},
			"awsRegion":      "us-west-2",
		}},
		check: func(t *testing.T, r rendering) {
			sa := r.one(t, "ServiceAccount")
			if got := sa.GetAnnotations()["eks.amazonaws.com/role-arn"]; got != roleARN {
				t.Errorf("ServiceAccount role-arn annotation %q, want %q", got, roleARN)
			}
			d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
			if d.Spec.Template.Spec.ServiceAccountName != sa.GetName() {
				t.Errorf("the pods run as %q, not the annotated ServiceAccount %q", d.Spec.Template.Spec.ServiceAccountName, sa.GetName())
			}
			c := d.Spec.Template.Spec.Containers[0]
			if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "AWS_REGION" }); i < 0 || c.Env[i].Value != "us-west-2" {
				t.Errorf("AWS_REGION not us-west-2 in %+v", c.Env)
			}
		},
	}, {
		name: "customized",
		r: release{Name: "platform", Namespace: "infra", Values: map[string]any{
			"replicaCount":   1,
			"serviceAccount": map[string]any{"create": false, "name": "existing-sa"},
			"rbac": map[string]any{
				"crdStrategyResources": []any{
					map[string]any{"apiGroup": "upgrademgr.keikoproj.io", "resources": []any{"rollingupgrades"}},
					map[string]any{"apiGroup": "argoproj.io", "resources": []any{"workflows"}},
				},
			},
			"extraArgs":                 []any{"--zap-devel"},
			"extraEnv":                  []any{map[string]any{"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"}},
			"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/instance": "platform"}}}},
			"allowNoBoundaries":         true,
			"dryRun":                    true,
			"clusterAutoscaler":         map[string]any{"priorityConfigMap": map[string]any{"enabled": true}},
			"networkPolicy": map[string]any{"enabled": true, "webhookFrom": apiServerSource, "metricsFrom": []any{
				map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}},
			}},
		}},
		check: func(t *testing.T, r rendering) {
			if len(r.all("ServiceAccount")) > 0 {
				t.Error("a ServiceAccount is rendered with serviceAccount.create false")
			}
			if len(r.all("PodDisruptionBudget")) > 0 {
				t.Error("a PodDisruptionBudget with minAvailable 1 is rendered for a single replica: it would block every drain")
			}
			argo := slices.IndexFunc(roleRules(t, r, "ClusterRole"), func(rule rbacv1.PolicyRule) bool {
				return slices.Equal(rule.APIGroups, []string{"argoproj.io"}) && slices.Equal(rule.Resources, []string{"workflows"}) && slices.Contains(rule.Verbs, "create")
			})
			if argo < 0 {
				t.Error("no ClusterRole rule for the extra crd strategy resource argoproj.io workflows")
			}
			d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--zap-devel") || !hasEnv(c, "AWS_STS_REGIONAL_ENDPOINTS") {
				t.Errorf("extraArgs or extraEnv missing: %v %+v", c.Args, c.Env)
			}
			if tsc := d.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule {
				t.Errorf("topologySpreadConstraints %+v, want the one from values", tsc)
			}
			if !strings.HasPrefix(d.Name, "platform") {
				t.Errorf("Deployment %s is not named after the release", d.Name)
			}
			if !slices.Contains(c.Args, "--cluster-autoscaler-priority-configmap=kube-system/cluster-autoscaler-priority-expander") {
				t.Errorf("clusterAutoscaler.priorityConfigMap: no --cluster-autoscaler-priority-configmap in %v", c.Args)
			}
			if role := r.find("Role", "platform-instance-manager-autoscaler-priority"); role == nil || role.GetNamespace() != "kube-system" {
				t.Errorf("no Role for the priority ConfigMap in kube-system: %v", role)
			}
			if !slices.Contains(c.Args, "--dry-run") {
				t.Errorf("dryRun: no --dry-run in %v", c.Args)
			}
			if !slices.Contains(c.Args, "--allow-no-boundaries") {
				t.Errorf("allowNoBoundaries: no --allow-no-boundaries in %v", c.Args)
			}
			np := typed[networkingv1.NetworkPolicy](t, r.one(t, "NetworkPolicy"))
			if len(np.Spec.Ingress) != 3 || np.Spec.Ingress[1].Ports[0].Port.IntValue() != 8080 || len(np.Spec.Ingress[1].From) != 1 {
				t.Errorf("NetworkPolicy ingress %+v: want the webhook port, the metrics port from monitoring, the probes", np.Spec.Ingress)
			}
		},
	}}
}

// TestRenderings renders every case, runs the common and the case's checks,
// and applies the rendering to the local control plane with
// --dry-run=server, which validates every object against the API server's
// schemas (the CRDs of cert-manager and the Prometheus Operator are
// permissive stand-ins from testdata/crds).
func TestRenderings(t *testing.T) {
	cases := renderingCases(t)
	tool(t, "helm")
	e := env.Start(t, env.Options{CRDDirectoryPaths: []string{
		filepath.Join(chartDir, "crds"), filepath.Join(chartDir, "testdata", "crds"),
	}})
	kc := kubectl(t)
	for _, ns := range []string{"im-system", "im-config", "infra"} {
		if out, err := run(kc, "--kubeconfig", e.Kubeconfig, "create", "namespace", ns); err != nil {
			t.Fatalf("create namespace %s: %v\n%s", ns, err, out)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.r)
			checkCommon(t, c.r, r)
			c.check(t, r)

			path := filepath.Join(t.TempDir(), "rendering.yaml")
			if err := os.WriteFile(path, []byte(r.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := run(kc, "--kubeconfig", e.Kubeconfig, "apply", "--dry-run=server", "-f", path)
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
			}
			// One line per object, each accepted by the server.
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != len(r.objects) {
				t.Errorf("kubectl applied %d objects, the rendering has %d:\n%s", len(lines), len(r.objects), out)
			}
			for _, l := range lines {
				if !strings.HasSuffix(l, "(server dry run)") {
					t.Errorf("unexpected kubectl output line %q", l)
				}
			}
		})
	}
}

// checkCommon checks what holds for every value set: objects in the right
// namespaces, every Role and ClusterRole bound to the manager's
// ServiceAccount, Services and the Deployment selecting the manager pods,
// the manager accepting its arguments.
func checkCommon(t *testing.T, rel release, r rendering) {
	t.Helper()
	managerFlags(t, r)
	d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
	podLabels := d.Spec.Template.Labels
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Error("the Deployment's selector does not select its pods")
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		t.Error("the pods have no serviceAccountName")
	}
	configNS := rel.Namespace
	if ns, ok := rel.Values["configNamespace"].(string); ok {
		configNS = ns
	}

	bound := map[string]bool{}
	for _, o := range r.objects {
		kind, ns := o.GetKind(), o.GetNamespace()
		switch kind {
		case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if ns != "" {
				t.Errorf("cluster-scoped %s %s has namespace %q", kind, o.GetName(), ns)
			}
		case "ConfigMap":
			if ns != configNS {
				t.Errorf("ConfigMap %s in %q, want the config namespace %q", o.GetName(), ns, configNS)
			}
		case "Role", "RoleBinding":
			if ns != rel.Namespace && ns != configNS && ns != "kube-system" {
				t.Errorf("%s %s in namespace %q", kind, o.GetName(), ns)
			}
		default:
			if ns != rel.Namespace {
				t.Errorf("%s %s in namespace %q, want the release namespace %q", kind, o.GetName(), ns, rel.Namespace)
			}
		}
		switch kind {
		case "RoleBinding", "ClusterRoleBinding":
			var ref rbacv1.RoleRef
			var subjects []rbacv1.Subject
			if kind == "RoleBinding" {
				b := typed[rbacv1.RoleBinding](t, o)
				ref, subjects = b.RoleRef, b.Subjects
			} else {
				b := typed[rbacv1.ClusterRoleBinding](t, o)
				ref, subjects = b.RoleRef, b.Subjects
			}
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: rel.Namespace}}
			if !slices.Equal(subjects, want) {
				t.Errorf("%s %s binds %+v, want the manager's ServiceAccount alone", kind, o.GetName(), subjects)
			}
			bound[fmt.Sprintf("%s/%s/%s", ref.Kind, ns, ref.Name)] = true
		case "Service":
			if s := typed[corev1.Service](t, o); !selects(s.Spec.Selector, podLabels) {
				t.Errorf("Service %s does not select the manager pods", s.Name)
			}
		}
	}
	for _, o := range append(r.all("Role"), r.all("ClusterRole")...) {
		if key := fmt.Sprintf("%s/%s/%s", o.GetKind(), o.GetNamespace(), o.GetName()); !bound[key] {
			t.Errorf("%s is bound to nobody", key)
		}
	}
}

// selects reports whether the label selector matchLabels selects set.
func selects(matchLabels, set map[string]string) bool {
	return len(matchLabels) > 0 && labels.SelectorFromSet(matchLabels).Matches(labels.Set(set))
}

func hasEnv(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// rotatorRBAC reports whether the rendering grants what only the
// certificate rotation needs: Secrets, or writing webhook configurations.
func rotatorRBAC(t *testing.T, r rendering) bool {
	rules := append(roleRules(t, r, "Role"), roleRules(t, r, "ClusterRole")...)
	return slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool {
		return slices.Contains(rule.Resources, "secrets") ||
			(slices.Contains(rule.APIGroups, "admissionregistration.k8s.io") && slices.Contains(rule.Verbs, "update"))
	})
}
