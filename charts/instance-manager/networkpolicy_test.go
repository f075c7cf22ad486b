package chart

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestNetworkPolicy checks the shape of the manager's NetworkPolicy as
// rendered. The local test world has no CNI, so no NetworkPolicy is
// enforced there: what a pod can reach is asserted here, on the rendering,
// and what a caller that does reach the port costs is asserted by
// test/integration's TestWebhookPortUnauthenticatedCaller.
func TestNetworkPolicy(t *testing.T) {
	t.Run("on by default, webhook port from the API server only", func(t *testing.T) {
		r := render(t, release{Namespace: "im-system"})
		np := typed[networkingv1.NetworkPolicy](t, r.one(t, "NetworkPolicy"))
		d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
		if !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) || len(np.Spec.PodSelector.MatchExpressions) > 0 {
			t.Errorf("podSelector %+v does not select the manager pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
		}
		webhookPort := d.Spec.Template.Spec.Containers[0].Ports[slices.IndexFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" })].ContainerPort
		opened := map[int]int{} // port -> rules opening it
		for i, rule := range np.Spec.Ingress {
			if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
				t.Fatalf("ingress[%d] %+v: want one port per rule", i, rule)
			}
			port := rule.Ports[0].Port.IntValue()
			opened[port]++
			switch port {
			case int(webhookPort):
				if len(rule.From) != 1 || rule.From[0].IPBlock == nil || rule.From[0].IPBlock.CIDR != "10.0.0.0/28" ||
					rule.From[0].PodSelector != nil || rule.From[0].NamespaceSelector != nil {
					t.Errorf("webhook port %d from %+v, want the API server's ipBlock 10.0.0.0/28 alone", port, rule.From)
				}
			case 8081:
				// Health probes: the kubelet's, no data served.
			default:
				t.Errorf("ingress[%d] opens port %d by default (the metrics port needs metricsFrom)", i, port)
			}
		}
		if opened[int(webhookPort)] != 1 {
			t.Errorf("the webhook port %d is opened by %d rules, want 1", webhookPort, opened[int(webhookPort)])
		}
		// The manager refuses other sources itself, where no CNI enforces
		// the policy.
		if got := managerFlags(t, r).WebhookAllowedSources; !slices.Equal(got, []string{"10.0.0.0/28"}) {
			t.Errorf("--webhook-allowed-sources %v, want the policy's [10.0.0.0/28]", got)
		}
	})
	t.Run("a selector peer: the manager does not guess the sources", func(t *testing.T) {
		from := append([]any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}}}}, apiServerSource...)
		r := render(t, release{Namespace: "im-system", Values: map[string]any{"networkPolicy": map[string]any{"webhookFrom": from}}})
		if got := managerFlags(t, r).WebhookAllowedSources; len(got) != 0 {
			t.Errorf("--webhook-allowed-sources %v with a selector among the peers, want none (the manager cannot match a selector)", got)
		}
	})
	t.Run("metrics port separately", func(t *testing.T) {
		monitoring := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}
		r := render(t, release{Namespace: "im-system", Values: map[string]any{"networkPolicy": map[string]any{"webhookFrom": apiServerSource, "metricsFrom": monitoring}}})
		np := typed[networkingv1.NetworkPolicy](t, r.one(t, "NetworkPolicy"))
		i := slices.IndexFunc(np.Spec.Ingress, func(rule networkingv1.NetworkPolicyIngressRule) bool { return rule.Ports[0].Port.IntValue() == 8080 })
		if i < 0 || len(np.Spec.Ingress[i].From) != 1 || np.Spec.Ingress[i].From[0].NamespaceSelector == nil || np.Spec.Ingress[i].From[0].IPBlock != nil {
			t.Errorf("metrics port: %+v, want a rule of its own from the monitoring namespace", np.Spec.Ingress)
		}
	})
	t.Run("off when disabled", func(t *testing.T) {
		r := render(t, release{Namespace: "im-system", Values: map[string]any{"networkPolicy": map[string]any{"enabled": false}}})
		if nps := r.all("NetworkPolicy"); len(nps) != 0 {
			t.Errorf("networkPolicy.enabled false renders %d NetworkPolicies", len(nps))
		}
	})
	for _, c := range []struct {
		name string
		from []any
		want string
	}{
		{"no API server source", nil, "networkPolicy.webhookFrom is empty"},
		{"a peer that admits everyone", []any{map[string]any{}}, "networkPolicy.webhookFrom[0] lets every source in"},
		{"every IPv4 address", []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}, map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}, "networkPolicy.webhookFrom[1] lets every source in"},
	} {
		t.Run("refused: "+c.name, func(t *testing.T) {
			out, err := template(t, release{Namespace: "im-system", Values: map[string]any{"networkPolicy": map[string]any{"webhookFrom": c.from}}})
			if err == nil {
				t.Fatalf("helm template accepted webhookFrom %v:\n%.300s", c.from, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template's error %q does not say %q", err, c.want)
			}
		})
	}
}
