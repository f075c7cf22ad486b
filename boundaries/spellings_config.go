package boundaries

import (
	"encoding/json"
	"sync"
)

// spelledCanonically returns a copy of cfg whose defaults (and
// conditionals' defaults) spell enumerated values canonically, so that
// recomputing an effective spec from it (Violations) matches the canonical
// spec admission stored even when the admin wrote the ConfigMap in
// keikoproj's spellings. cfg is not changed.
func spelledCanonically(cfg *Config) *Config {
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

type canonicalEntry struct{ in, out *Config }

// canonicalCacheSize bounds the configs kept: the valid one, the last good
// one of a rollout and a couple being replaced.
const canonicalCacheSize = 4

var canonicalConfigs = &canonicalCache{}

func (c *canonicalCache) get(cfg *Config) *Config {
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
func buildCanonicalConfig(cfg *Config) *Config {
	out := *cfg
	out.Defaults = canonicalDefaults(cfg.Defaults)
	out.Conditionals = make([]Conditional, len(cfg.Conditionals))
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
