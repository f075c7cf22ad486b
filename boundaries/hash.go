package boundaries

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// hashVersion starts every hashed document, so that a change of the
// canonical form below changes every hash (and re-admits every group) on
// purpose rather than by accident.
const hashVersion = "instancemgr.keikoproj.io/boundaries-hash/v2"

// canonicalConfig is what Hash encodes: everything that can change an
// effective spec, in a form independent of how the ConfigMap was written.
// Rollout is left out: it changes how fast, not what.
type canonicalConfig struct {
	Version       string                 `json:"version"`
	Restricted    []string               `json:"restricted"`
	Merge         []string               `json:"merge"`
	MergeOverride []string               `json:"mergeOverride"`
	Replace       []string               `json:"replace"`
	Defaults      any                    `json:"defaults"`
	Conditionals  []canonicalConditional `json:"conditionals"`
	Enforcement   Enforcement            `json:"enforcement"`
	Excluded      bool                   `json:"namespaceExcluded"`
	Sensitive     []string               `json:"sensitive"`
	// NodeIsolation is the isolation taint's effect when isolation is on
	// ("" when off, leaving hashes without isolation as they were): the
	// change from NoSchedule to NoExecute (N24) re-admits, and so
	// re-taints, every isolated group, and only those.
	NodeIsolation string `json:"nodeIsolation,omitempty"`
	Pins          *Pins  `json:"pins,omitempty"`
}

type canonicalConditional struct {
	Selector string `json:"selector"`
	Defaults any    `json:"defaults"`
}

// Hash returns a stable hex SHA-256 of the boundary inputs, for the
// instancemgr.keikoproj.io/boundaries-hash annotation (BOUNDARIES.md, "Keeping
// the tenant's intent" and "Fan-out"). It covers the rules (each list
// sorted: order within a list means nothing), the defaults, the
// conditionals (in order, since later ones win; selectors in a canonical
// form where "a=b", "a==b" and "a in (b)" agree; their defaults), the enforcement (empty counts as warn) and namespaceExcluded.
// It leaves out rollout, which changes no spec, and covers the revision's
// Pins (not for excluded namespaces). The same semantic ConfigMap
// gives the same hash whatever its YAML formatting or key order. A nil
// Config (no ConfigMap) hashes to one fixed value whatever namespaceExcluded
// is, since then nothing applies either way.
func (c *Config) Hash(namespaceExcluded bool) string {
	if c == nil {
		return hashOf([]byte(hashVersion + "\nno-config"))
	}
	if h, ok := parsedHashes.get(c); ok {
		if namespaceExcluded {
			return h[1]
		}
		return h[0]
	}
	return c.computeHash(namespaceExcluded)
}

// computeHash is Hash without the memo.
func (c *Config) computeHash(namespaceExcluded bool) string {
	cc := canonicalConfig{
		Version:       hashVersion,
		Restricted:    sortedCopy(c.Restricted),
		Merge:         sortedCopy(c.Merge),
		MergeOverride: sortedCopy(c.MergeOverride),
		Replace:       sortedCopy(c.Replace),
		Defaults:      canonicalSpec(c.Defaults),
		Conditionals:  make([]canonicalConditional, len(c.Conditionals)),
		Enforcement:   c.Enforcement,
		Excluded:      namespaceExcluded,
		Sensitive:     sortedCopy(c.Sensitive),
	}
	if c.NodeIsolation {
		cc.NodeIsolation = IsolationTaintEffect
	}
	if !namespaceExcluded {
		// Excluded groups are admitted as submitted: pins change nothing
		// for them.
		cc.Pins = c.Pins
	}
	if cc.Enforcement == "" {
		cc.Enforcement = EnforcementWarn
	}
	for i, cond := range c.Conditionals {
		sel := cond.Selector
		if sel == nil {
			parsed, err := labels.Parse(cond.AnnotationSelector)
			if err != nil {
				// Effective rejects it; hash it as written.
				cc.Conditionals[i] = canonicalConditional{Selector: "invalid:" + cond.AnnotationSelector}
				continue
			}
			sel = parsed
		}
		cc.Conditionals[i] = canonicalConditional{Selector: canonicalSelector(sel), Defaults: canonicalSpec(cond.Defaults)}
	}
	raw, err := json.Marshal(cc)
	if err != nil {
		// Only a hand-built Config holding values with no JSON form gets
		// here; its Go rendering still separates different configs.
		raw = fmt.Appendf(nil, "%#v", cc)
	}
	return hashOf(raw)
}

// canonicalSpec is the defaults' spec in canonical form, {} when there is
// none, so that absent, null and empty defaults hash alike.
func canonicalSpec(defaults map[string]any) any {
	spec, err := normalizeObject(defaults["spec"], "spec")
	if err != nil {
		return fmt.Sprintf("%#v", defaults)
	}
	return spec
}

// canonicalSelector renders a selector so that equivalent spellings agree:
// "a=b", "a==b" and "a in (b)" are one requirement, as are "a!=b" and
// "a notin (b)"; requirements are sorted, values too.
func canonicalSelector(sel labels.Selector) string {
	reqs, _ := sel.Requirements()
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op := r.Operator()
		switch op {
		case selection.Equals, selection.DoubleEquals:
			op = selection.In
		case selection.NotEquals:
			op = selection.NotIn
		}
		vals := r.Values().UnsortedList()
		slices.Sort(vals)
		b, _ := json.Marshal([]any{r.Key(), string(op), vals}) // cannot fail: strings only
		parts = append(parts, string(b))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashMemo keeps Hash(false) and Hash(true) of the configs Parse returned
// last. A parsed Config does not change, and its hash is asked for several
// times per admission review (a JSON rendering of every default each
// time). The memo holds its configs, so a pointer is never reused while
// it is a key; a hand-built Config is not memoised.
type hashMemo struct {
	mu      sync.Mutex
	entries []memoEntry // most recent last
}

type memoEntry struct {
	cfg    *Config
	hashes [2]string
}

// hashMemoSize bounds the memo: the valid config, the last good one of a
// rollout, and ConfigMaps being checked by the validating webhook.
const hashMemoSize = 8

var parsedHashes = &hashMemo{}

func (m *hashMemo) add(c *Config) {
	e := memoEntry{cfg: c, hashes: [2]string{c.computeHash(false), c.computeHash(true)}}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, e)
	if len(m.entries) > hashMemoSize {
		m.entries = append(m.entries[:0:0], m.entries[len(m.entries)-hashMemoSize:]...)
	}
}

func (m *hashMemo) get(c *Config) ([2]string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.entries) - 1; i >= 0; i-- {
		if m.entries[i].cfg == c {
			return m.entries[i].hashes, true
		}
	}
	return [2]string{}, false
}
