package webhooks

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/boundaries"
)

// enumField is a spec field with a fixed set of values, by its path from
// spec ("[]" steps into every element of a list; a path ending in "[]" is
// a list of such values).
type enumField struct {
	path   string
	values []string // canonical spellings
}

// enumFields lists every enumerated spec field. Manifests written for
// keikoproj instance-manager spell these in any case and with or without
// '-' or '_' (lifecycle: Launch, defaultResult: CONTINUE, strategy.type:
// rollingupdate, strategy: capacity-optimized); the mutating webhook turns
// each into the canonical spelling listed here, and the validating webhook
// accepts only that.
var enumFields = []enumField{
	{"provisioner", []string{"eks", "eks-managed", "eks-fargate", "eks-cf"}},
	{"strategy.type", []string{"rollingUpdate", "crd", "managed"}},
	{"strategy.crd.concurrencyPolicy", []string{"forbid", "replace", "allow"}},
	{"eks.type", []string{"LaunchTemplate", "LaunchConfiguration"}},
	{"eks.configuration.volumes[].type", []string{"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}},
	{"eks.configuration.volumes[].mountOptions.fileSystem", []string{"xfs", "ext4"}},
	{"eks.configuration.userData[].stage", []string{"PreBootstrap", "PostBootstrap"}},
	{"eks.configuration.mixedInstancesPolicy.strategy", []string{"CapacityOptimized", "LowestPrice", "PriceCapacityOptimized"}},
	{"eks.configuration.mixedInstancesPolicy.instancePool", []string{"SubFamilyFlexible"}},
	{"eks.configuration.lifecycleHooks[].lifecycle", []string{"launch", "terminate"}},
	{"eks.configuration.lifecycleHooks[].defaultResult", []string{"abandon", "continue"}},
	{"eks.configuration.metadataOptions.httpEndpoint", []string{"enabled", "disabled"}},
	{"eks.configuration.metadataOptions.httpTokens", []string{"required", "optional"}},
	{"eks.configuration.placement.tenancy", []string{"default", "dedicated", "host"}},
	{"eks.configuration.metricsCollection[]", sortedKeys(asgMetrics)},
	{"eks.configuration.suspendProcesses[]", sortedKeys(asgProcesses)},
	{"eks-managed.configuration.capacityType", []string{"ON_DEMAND", "SPOT"}},
}

// fold is the spelling-insensitive key of an enum value: lower case,
// without '-' and '_' (capacity-optimized, CapacityOptimized and
// CAPACITY_OPTIMIZED fold alike).
func fold(s string) string {
	return separators.Replace(strings.ToLower(s))
}

// separators drops '-' and '_' (a Replacer is built once and safe for
// concurrent use; building one per call was a quarter of the CPU time of
// an admission review).
var separators = strings.NewReplacer("-", "", "_", "")

// canonicalSpellings maps, for each of enumFields (same index), the folded
// spelling of every value to its canonical spelling.
var canonicalSpellings = func() []map[string]string {
	out := make([]map[string]string, len(enumFields))
	for i, f := range enumFields {
		out[i] = map[string]string{}
		for _, v := range f.values {
			out[i][fold(v)] = v
		}
	}
	return out
}()

// NormalizeSpellings rewrites, in a decoded spec (the object under
// "spec"), every enumerated value spelled in another case or with other
// separators to its canonical spelling. Values that match no canonical
// spelling are left for validation to report.
func NormalizeSpellings(spec map[string]any) {
	for i, f := range enumFields {
		canonical := canonicalSpellings[i]
		visit(spec, strings.Split(f.path, "."), field.NewPath("spec"), func(v string, _ *field.Path) string {
			if c, ok := canonical[fold(v)]; ok {
				return c
			}
			return v
		})
	}
}

// visit applies fn to every string at path under node (at field path at),
// replacing it with fn's result.
func visit(node any, path []string, at *field.Path, fn func(string, *field.Path) string) {
	m, ok := node.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	key, list := strings.CutSuffix(path[0], "[]")
	child, ok := m[key]
	if !ok {
		return
	}
	at = at.Child(key)
	last := len(path) == 1
	switch {
	case list:
		items, _ := child.([]any)
		for i, it := range items {
			if s, ok := it.(string); ok && last {
				items[i] = fn(s, at.Index(i))
			} else if !last {
				visit(it, path[1:], at.Index(i), fn)
			}
		}
	case last:
		if s, ok := child.(string); ok {
			m[key] = fn(s, at)
		}
	default:
		visit(child, path[1:], at, fn)
	}
}

// validateSpellings reports enumerated values of a decoded spec that are
// not canonical after NormalizeSpellings: values not allowed in any
// spelling, with their field path and the allowed values.
func validateSpellings(spec map[string]any) field.ErrorList {
	var errs field.ErrorList
	for _, f := range enumFields {
		visit(spec, strings.Split(f.path, "."), field.NewPath("spec"), func(v string, at *field.Path) string {
			if v != "" && !slices.Contains(f.values, v) {
				errs = append(errs, field.NotSupported(at, v, f.values))
			}
			return v
		})
	}
	return errs
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// canonicalConfig returns a copy of cfg whose defaults (and conditionals'
// defaults) spell enumerated values canonically, so that recomputing an
// effective spec from it (boundaries.Config.Verify) matches the canonical
// spec the mutating webhook stored even when the admin wrote the
// ConfigMap in keikoproj's spellings. cfg is not changed.
func canonicalConfig(cfg *boundaries.Config) *boundaries.Config {
	if cfg == nil {
		return nil
	}
	return canonicalConfigs.get(cfg)
}

// canonicalCache keeps the canonical form of the last few configs (a
// config is immutable once parsed; the store holds one valid config, and
// a progressive rollout one more): building it is a JSON round trip of
// every default, too much to repeat on every admission review.
type canonicalCache struct {
	mu      sync.Mutex
	entries []canonicalEntry // most recent last
}

type canonicalEntry struct{ in, out *boundaries.Config }

// canonicalCacheSize bounds the configs kept: the valid one, the last good
// one of a rollout and a couple being replaced.
const canonicalCacheSize = 4

var canonicalConfigs = &canonicalCache{}

func (c *canonicalCache) get(cfg *boundaries.Config) *boundaries.Config {
	c.mu.Lock()
	for _, e := range c.entries {
		if e.in == cfg {
			c.mu.Unlock()
			return e.out
		}
	}
	c.mu.Unlock()
	out := buildCanonicalConfig(cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, canonicalEntry{cfg, out})
	if len(c.entries) > canonicalCacheSize {
		c.entries = c.entries[len(c.entries)-canonicalCacheSize:]
	}
	return out
}

// buildCanonicalConfig copies cfg with the spellings of its defaults and
// conditionals' defaults normalised.
func buildCanonicalConfig(cfg *boundaries.Config) *boundaries.Config {
	out := *cfg
	out.Defaults = canonicalDefaults(cfg.Defaults)
	out.Conditionals = make([]boundaries.Conditional, len(cfg.Conditionals))
	for i, c := range cfg.Conditionals {
		c.Defaults = canonicalDefaults(c.Defaults)
		out.Conditionals[i] = c
	}
	return &out
}

// canonicalDefaults deep-copies defaults ({"spec": {...}}) and normalises
// the spellings of its spec.
func canonicalDefaults(defaults map[string]any) map[string]any {
	if defaults == nil {
		return nil
	}
	raw, err := json.Marshal(defaults)
	if err != nil {
		return defaults
	}
	var out map[string]any
	if json.Unmarshal(raw, &out) != nil {
		return defaults
	}
	if spec, ok := out["spec"].(map[string]any); ok {
		NormalizeSpellings(spec)
	}
	return out
}
