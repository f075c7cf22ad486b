package boundaries

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// KeyDrains is the boundary ConfigMap key of the admin's drain bounds
// (issue 36 item 5): a deadline after which a node's drain stops waiting
// for refused evictions and graceful terminations (reconciler/drain).
const KeyDrains = "drains"

// MinDrainDeadline is the shortest drain deadline the ConfigMap accepts: a
// shorter one would force pods before their PodDisruptionBudgets had a
// chance to let a replacement become Ready.
const MinDrainDeadline = time.Minute

// DrainBounds are the parsed data.drains of the boundary ConfigMap:
//
//	drains: |
//	  deadline: 2h          # every group's drains, cluster-wide
//	  namespaces:
//	    team-a: 30m         # narrows the cluster deadline for team-a's groups
//
// Durations are Go durations (30m, 1h30m), at least MinDrainDeadline. A
// namespace entry may only narrow the cluster deadline (be no longer); it
// sets one for its namespace when the cluster has none. Absent: drains
// have no deadline (they wait for every eviction, as the Eviction API
// allows).
type DrainBounds struct {
	// Deadline applies to the drains of every group's nodes; 0: none.
	Deadline time.Duration
	// Namespaces are deadlines for the groups of a namespace (the
	// InstanceGroup's, whichever namespaces the pods on its nodes are in).
	Namespaces map[string]time.Duration
}

// drainBoundsYAML is data.drains as written.
type drainBoundsYAML struct {
	Deadline   string            `json:"deadline,omitempty"`
	Namespaces map[string]string `json:"namespaces,omitempty"`
}

// parseDrains reads data[KeyDrains] into c.Drains.
func (p *parser) parseDrains(c *Config, data map[string]string) {
	s, ok := data[KeyDrains]
	if !ok || strings.TrimSpace(s) == "" {
		return
	}
	var raw drainBoundsYAML
	if err := decodeStrict(s, &raw); err != nil {
		p.addf("data.%s%v", KeyDrains, err)
		return
	}
	b := &DrainBounds{}
	bad := false
	if raw.Deadline != "" {
		b.Deadline, bad = p.drainDeadline(raw.Deadline, "data."+KeyDrains+".deadline")
	}
	for _, ns := range slices.Sorted(maps.Keys(raw.Namespaces)) {
		at := fmt.Sprintf("data.%s.namespaces.%s", KeyDrains, ns)
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			p.addf("%s: %q is not a namespace name: %s", at, ns, strings.Join(msgs, "; "))
			bad = true
			continue
		}
		d, nsBad := p.drainDeadline(raw.Namespaces[ns], at)
		switch {
		case nsBad:
			bad = true
		case b.Deadline > 0 && d > b.Deadline:
			p.addf("%s: %s is longer than the cluster's deadline %s; a namespace's deadline may only narrow it (at most %s)", at, d, b.Deadline, b.Deadline)
			bad = true
		default:
			if b.Namespaces == nil {
				b.Namespaces = map[string]time.Duration{}
			}
			b.Namespaces[ns] = d
		}
	}
	if !bad && (b.Deadline > 0 || len(b.Namespaces) > 0) {
		c.Drains = b
	}
}

// drainDeadline parses one deadline; bad is true when it was refused
// (a problem names at and what is valid).
func (p *parser) drainDeadline(s, at string) (d time.Duration, bad bool) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.addf("%s: %q is not a duration (valid: a Go duration of at least %s, such as 30m or 2h)", at, s, MinDrainDeadline)
		return 0, true
	case d < MinDrainDeadline:
		p.addf("%s: %s is shorter than %s (valid: a Go duration of at least %s, such as 30m or 2h)", at, d, MinDrainDeadline, MinDrainDeadline)
		return 0, true
	}
	return d, false
}

// DrainDeadline returns how long the drain of a node of a group in
// namespace may wait for evictions, counted from the drain's start,
// before it deletes the pods it could not evict: the namespace's entry of
// data.drains, else the cluster's deadline; 0 when neither is set, or c
// is nil (no ConfigMap), or namespace is "" and the cluster sets none.
func (c *Config) DrainDeadline(namespace string) time.Duration {
	if c == nil || c.Drains == nil {
		return 0
	}
	if d, ok := c.Drains.Namespaces[namespace]; ok {
		return d
	}
	return c.Drains.Deadline
}
