package boundaries

import (
	"fmt"
	"strings"
)

// KeyNodeIsolation is the boundary ConfigMap key of per-namespace node
// isolation (issue 25, N9): "perNamespace" turns it on; absent, blank or
// "none" leaves it off.
const KeyNodeIsolation = "nodeIsolation"

// Node isolation modes.
const (
	NodeIsolationNone         = "none"
	NodeIsolationPerNamespace = "perNamespace"
)

// IsolationTaintKey is the key of the taint node isolation gives every
// node of a tenant group, valued with the group's namespace (effect
// IsolationTaintEffect); the nodes also carry the label of the same key
// (v1alpha1.LabelInstanceGroupNamespace), which the controller sets on
// every group. The ValidatingAdmissionPolicy shipped with the chart
// (nodeIsolation.enabled) refuses pods of other namespaces that tolerate
// the taint or select the label, and pods created with spec.nodeName.
const IsolationTaintKey = "instancemgr.keikoproj.io/namespace"

// IsolationTaintEffect is the isolation taint's effect (finding N24).
// NoExecute, not NoSchedule: the scheduler honours both, but a pod that
// reaches the node without the scheduler (spec.nodeName, a pods/binding)
// is checked only against NoExecute taints, by the kubelet's admission
// (kubernetes pkg/kubelet/lifecycle/predicate.go) and by
// kube-controller-manager's taint eviction controller, which also removes
// pods already on a node when it gets the taint. Tolerating it is what the
// policy restricts to the node's namespace.
const IsolationTaintEffect = "NoExecute"

// parseNodeIsolation reads data[KeyNodeIsolation] into c.NodeIsolation.
func (p *parser) parseNodeIsolation(c *Config, data map[string]string) {
	switch v := strings.TrimSpace(data[KeyNodeIsolation]); v {
	case "", NodeIsolationNone:
	case NodeIsolationPerNamespace:
		c.NodeIsolation = true
	default:
		p.addf("data.%s: %q is not a node isolation mode (valid: %s, %s)", KeyNodeIsolation, v, NodeIsolationPerNamespace, NodeIsolationNone)
	}
}

// isolate gives a tenant group's node sections (spec.eks.configuration and
// spec.eks-managed.configuration, where present) the isolation taint of
// namespace: any taint of IsolationTaintKey the spec has is replaced, so a
// group can neither drop its own nor wear another namespace's (nor keep
// the NoSchedule one of earlier releases). Fargate
// profiles run each pod on its own VM and get nothing.
func isolate(spec map[string]any, namespace string) {
	taint := map[string]any{"key": IsolationTaintKey, "value": namespace, "effect": IsolationTaintEffect}
	for _, section := range []string{"eks", "eks-managed"} {
		s, ok := spec[section].(map[string]any)
		if !ok {
			continue
		}
		c, ok := s["configuration"].(map[string]any)
		if !ok {
			c = map[string]any{}
			s["configuration"] = c
		}
		var kept []any
		if list, ok := c["taints"].([]any); ok {
			for _, t := range list {
				if m, ok := t.(map[string]any); ok && m["key"] == IsolationTaintKey {
					continue
				}
				kept = append(kept, t)
			}
		}
		c["taints"] = append(kept, taint)
	}
}

// missingIsolation names each node section of spec that lacks the
// isolation taint of namespace (a later mutation removed it).
func missingIsolation(spec map[string]any, namespace string) []string {
	var out []string
	for _, section := range []string{"eks", "eks-managed"} {
		if _, ok := spec[section].(map[string]any); !ok {
			continue
		}
		found := false
		if list, ok := getPath(spec, []string{section, "configuration", "taints"}); ok {
			for _, t := range asList(list) {
				if m, ok := t.(map[string]any); ok && m["key"] == IsolationTaintKey && m["value"] == namespace && m["effect"] == IsolationTaintEffect {
					found = true
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("spec.%s.configuration.taints lacks the node isolation taint %s=%s:%s (data.%s)", section, IsolationTaintKey, namespace, IsolationTaintEffect, KeyNodeIsolation))
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// isolationError names a missing namespace, which isolation needs.
func isolationError() error {
	return fmt.Errorf("data.%s is %s but the group's namespace is not known", KeyNodeIsolation, NodeIsolationPerNamespace)
}
