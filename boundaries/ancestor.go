package boundaries

import (
	"fmt"
	"slices"
	"strings"
)

// AncestorSharing is a shared rule on an ancestor of sensitive paths that
// the ConfigMap does not name: the rule makes them tenant-owned without
// the admin having written them (review 2026-11-26 N11, attack 16:
// shared.merge: [spec.eks.configuration] opens userData, metadataOptions,
// placement, volumes, lifecycleHooks to every tenant).
type AncestorSharing struct {
	// Rule is the rule as written, e.g. "shared.merge spec.eks.configuration",
	// or for a rule implied on another provisioner's section, its path and
	// "(implied by <named path>)".
	Rule string
	// Sensitive are the sensitive paths it shares, sorted.
	Sensitive []string
}

func (a AncestorSharing) String() string {
	return fmt.Sprintf("%s shares sensitive paths it does not name: %s", a.Rule, strings.Join(a.Sensitive, ", "))
}

// AncestorSharings returns the shared rules (named, or implied for an
// equivalent section) that govern a sensitive path (SensitivePaths) from
// an ancestor while no rule names the path itself, in rule order. A
// sensitive path under a shared ancestor is shared only when the
// ConfigMap names it (in shared, to share it; in restricted, to keep it).
// A nil Config has none.
func (c *Config) AncestorSharings() []AncestorSharing {
	if c == nil {
		return nil
	}
	rules, err := c.rules()
	if err != nil {
		return nil // Parse refuses such a Config already
	}
	byRule := map[string][]string{}
	var order []string
	for _, s := range c.Sensitive {
		if c.Names(s) {
			continue
		}
		// The nearest rule above s governs it (rules are outer first).
		var governing *rule
		for i := range rules {
			if strings.HasPrefix(s, rules[i].path+".") {
				governing = &rules[i]
			}
		}
		if governing == nil || governing.kind == ruleRestricted {
			continue
		}
		key := governing.kind.String() + " " + governing.path
		if !c.Names(governing.path) {
			key = governing.kind.String() + " " + governing.path + " (implied by the rule on an equivalent path of another provisioner)"
		}
		if _, ok := byRule[key]; !ok {
			order = append(order, key)
		}
		byRule[key] = append(byRule[key], s)
	}
	out := make([]AncestorSharing, 0, len(order))
	for _, k := range order {
		slices.Sort(byRule[k])
		out = append(out, AncestorSharing{Rule: k, Sensitive: byRule[k]})
	}
	return out
}
