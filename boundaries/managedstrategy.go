package boundaries

import (
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// keepManagedStrategy gives a group whose effective provisioner rotates
// its own nodes (eks-managed: EKS; eks-fargate: a VM per pod) the one
// strategy it has, managed, where the tenant asked for managed or for no
// strategy and the rules gave it another (a default): a default strategy is written for
// eks and does not mean the same there. Without this, restricting
// spec.strategy (default rollingUpdate) made every such group invalid, so
// the ConfigMap's dry run refused the tightening (review 2026-11-26 N13,
// attack 19). A tenant's other strategy is left as the rules made it, for
// validation to refuse. Overrides of spec.strategy are dropped: the
// tenant's value, or its absence, is what is kept. out and submitted are
// specs (the value of .spec); out is changed in place.
func keepManagedStrategy(out, submitted map[string]any, res *Result) {
	p, _ := out["provisioner"].(string)
	if !strings.EqualFold(p, v1alpha1.ProvisionerEKSManaged) && !strings.EqualFold(p, v1alpha1.ProvisionerEKSFargate) {
		return
	}
	if s, ok := submitted["strategy"].(map[string]any); ok {
		if typ, _ := s["type"].(string); !strings.EqualFold(typ, v1alpha1.StrategyManaged) {
			return
		}
	} else if submitted["strategy"] != nil {
		return // not an object: validation says so
	}
	s, ok := out["strategy"].(map[string]any)
	if !ok {
		return // no strategy from the rules either: nothing to correct
	}
	if typ, _ := s["type"].(string); strings.EqualFold(typ, v1alpha1.StrategyManaged) {
		return
	}
	out["strategy"] = map[string]any{"type": v1alpha1.StrategyManaged}
	kept := res.Overrides[:0]
	for _, o := range res.Overrides {
		if !Covers("spec.strategy", o.Path) {
			kept = append(kept, o)
		}
	}
	res.Overrides = kept
}
