package boundaries

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RolloutPolicy is the progressive rollout of boundary changes (data key
// rollout: waves, soak, failure). A nil policy is today's fan-out: a
// boundary change reaches every group at once, bounded only by
// maxConcurrentUpgrades.
type RolloutPolicy struct {
	// Waves are the waves in order. Parse appends an implicit last wave
	// "rest" (every group no earlier wave took) when the last wave written
	// selects some groups only, so the last wave always takes the rest.
	Waves []Wave
	// Failure says when a wave has failed and the rollout halts.
	Failure FailureCriteria
	// Tenants is what tenants may decide about their own groups' place in
	// a rollout (rollout_tenants.go); the zero value: nothing.
	Tenants TenantChoices
}

// Wave is one step of a rollout. It takes, from the groups that no earlier
// wave took, those matching Selector and Namespaces (both, when both are
// set), or Percent of them, or all of them when it sets neither.
type Wave struct {
	// Name names the wave in status and Events ("wave-N" when not written).
	Name string
	// Selector is the label selector over the InstanceGroups' labels, as
	// written; "" selects by Namespaces or Percent only.
	Selector string
	// Namespaces, when set, limit the wave to groups of these namespaces.
	Namespaces []string
	// Percent, from 1 to 100, takes that share of the remaining groups
	// (rounded up); 0 when the wave selects by Selector/Namespaces or
	// takes the rest.
	Percent int
	// Soak is how long the wave's groups must stay healthy after they are
	// all Ready before the next wave starts.
	Soak time.Duration
	// Approval is ApprovalManual when the wave starts only after the admin
	// approves it (record.ActionApprove on the rollout record), "" when it
	// starts on its own once the wave before it completed.
	Approval string

	selector labels.Selector
}

// TakesRest reports whether the wave takes every remaining group.
func (w Wave) TakesRest() bool {
	return w.Selector == "" && len(w.Namespaces) == 0 && w.Percent == 0
}

// Matches reports whether a group of namespace with labels belongs to a
// wave that selects by Selector and Namespaces (a wave taking the rest
// matches everything; a Percent wave matches everything it may draw from).
func (w Wave) Matches(namespace string, groupLabels map[string]string) bool {
	if len(w.Namespaces) > 0 && !slices.Contains(w.Namespaces, namespace) {
		return false
	}
	if w.Selector == "" {
		return true
	}
	sel := w.selector
	if sel == nil {
		parsed, err := labels.Parse(w.Selector)
		if err != nil {
			return false
		}
		sel = parsed
	}
	return sel.Matches(labels.Set(groupLabels))
}

// WaveLabelKeys returns the InstanceGroup label keys that the policy's
// waves select on for groups of namespace, each with the names of the
// waves that use it (in wave order); nil when no wave that may take a
// group of namespace has a selector. These keys are admin data: whoever
// writes them chooses the group's wave (a tenant joining the canary can
// fail there and halt the fleet: review security-2026-11-26, N13), so the
// validating webhook refuses a tenant's add, change or removal of them.
// A selector that does not parse (Parse refused it) contributes nothing.
func (p *RolloutPolicy) WaveLabelKeys(namespace string) map[string][]string {
	if p == nil {
		return nil
	}
	var out map[string][]string
	for _, w := range p.Waves {
		if w.Selector == "" || (len(w.Namespaces) > 0 && !slices.Contains(w.Namespaces, namespace)) {
			continue
		}
		sel := w.selector
		if sel == nil {
			parsed, err := labels.Parse(w.Selector)
			if err != nil {
				continue
			}
			sel = parsed
		}
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			if out == nil {
				out = map[string][]string{}
			}
			if !slices.Contains(out[r.Key()], w.Name) {
				out[r.Key()] = append(out[r.Key()], w.Name)
			}
		}
	}
	return out
}

// Describe renders what the wave selects, for Events: e.g. `namespaces
// [team-canary]`, `selector "tier=canary"`, `25% of the rest`, `the rest`.
func (w Wave) Describe() string {
	var parts []string
	if len(w.Namespaces) > 0 {
		parts = append(parts, "namespaces ["+strings.Join(w.Namespaces, ", ")+"]")
	}
	if w.Selector != "" {
		parts = append(parts, fmt.Sprintf("selector %q", w.Selector))
	}
	if w.Percent > 0 {
		parts = append(parts, fmt.Sprintf("%d%% of the rest", w.Percent))
	}
	if len(parts) == 0 {
		return "the rest"
	}
	return strings.Join(parts, " and ")
}

// FailureCriteria say when a wave's group has failed.
type FailureCriteria struct {
	// GroupError: a group of the wave in state Error for its new spec fails.
	GroupError bool
	// StartupTimeout: a group of the wave that is not Ready, with every
	// instance on the new spec and its nodes Ready, this long after it
	// was moved (or after it last made progress) fails.
	StartupTimeout time.Duration
	// MaxUnhealthyPercent: when more than this share of the nodes of the
	// wave's Ready groups are not Ready, the groups with such nodes fail.
	MaxUnhealthyPercent int
	// PodNotReadyAfter (failure.podNotReadyAfter): a pod of a Deployment
	// (through its ReplicaSet) or a StatefulSet, on a node of a moved
	// group that joined after the group's wave started, whose Ready
	// condition is not True for longer than this fails its group. 0 (the
	// default): not checked.
	PodNotReadyAfter time.Duration
	// MaxContainerRestarts (failure.maxContainerRestarts), when
	// LimitRestarts: such a pod with a container (or init container)
	// restarted more than this many times fails its group. Not checked
	// by default.
	MaxContainerRestarts int
	LimitRestarts        bool
}

// JudgesPods reports whether the criteria look at the tenants' pods on
// the moved groups' new nodes (podNotReadyAfter or maxContainerRestarts).
func (f FailureCriteria) JudgesPods() bool {
	return f.PodNotReadyAfter > 0 || f.LimitRestarts
}

// ApprovalManual is a wave's approval when the admin must approve it
// before it starts.
const ApprovalManual = "manual"

// Defaults of the rollout policy, when a policy has waves but does not say.
const (
	DefaultSoak                = 5 * time.Minute
	DefaultStartupTimeout      = 10 * time.Minute
	DefaultMaxUnhealthyPercent = 10
	// RestWave names the implicit last wave.
	RestWave = "rest"
)

// rolloutFields are the fields of data key rollout.
var rolloutFields = []string{"maxConcurrentUpgrades", "waves", "soak", "failure", "tenants", "windows", "freezes", "namespaceMaintenance"}

// rollout parses data key rollout: {maxConcurrentUpgrades: N, waves:
// [...], soak: duration, failure: {...}}, every field optional but one.
func (p *parser) rollout(c *Config, v any) {
	const at = "data." + KeyRollout
	m, ok := p.object(v, at, "an object with maxConcurrentUpgrades, waves, windows, freezes and/or namespaceMaintenance", rolloutFields...)
	if !ok {
		return
	}
	if len(m) == 0 {
		p.addf("%s: empty: set maxConcurrentUpgrades (an integer >= 1), waves, windows, freezes or namespaceMaintenance", at)
		return
	}
	if n, present := m["maxConcurrentUpgrades"]; present {
		c.MaxConcurrentUpgrades = p.maxConcurrent(n, at+".maxConcurrentUpgrades")
	}
	p.maintenance(c, m, at)
	wv, hasWaves := m["waves"]
	if !hasWaves {
		for _, f := range []string{"soak", "failure", "tenants"} {
			if _, present := m[f]; present {
				p.addf("%s.%s: has no effect without waves (a boundary change reaches every group at once); add waves or remove it", at, f)
			}
		}
		return
	}
	pol := &RolloutPolicy{Failure: FailureCriteria{
		GroupError: true, StartupTimeout: DefaultStartupTimeout, MaxUnhealthyPercent: DefaultMaxUnhealthyPercent,
	}}
	soak := DefaultSoak
	if sv, present := m["soak"]; present {
		soak = p.duration(sv, at+".soak", true)
	}
	if fv, present := m["failure"]; present {
		p.failure(&pol.Failure, fv, at+".failure")
	}
	if tv, present := m["tenants"]; present {
		p.tenants(&pol.Tenants, tv, at+".tenants")
	}
	pol.Waves = p.waves(wv, at+".waves", soak)
	if len(pol.Waves) > 0 {
		c.Rollout = pol
	}
}

func (p *parser) maxConcurrent(v any, at string) int {
	switch n := v.(type) {
	case nil:
		p.addf("%s: required: an integer >= 1", at)
	case int64:
		if n < 1 || n > math.MaxInt32 {
			p.addf("%s: %d is out of range (valid: an integer from 1 to %d)", at, n, math.MaxInt32)
			return 0
		}
		return int(n)
	default:
		p.addf("%s: expected an integer >= 1, got %s", at, kindOf(n))
	}
	return 0
}

// waveFields are the fields of one wave.
var waveFields = []string{"name", "selector", "namespaces", "percent", "soak", "approval"}

func (p *parser) waves(v any, at string, soak time.Duration) []Wave {
	l, ok := v.([]any)
	if !ok {
		p.addf("%s: expected a list of waves ({name, selector, namespaces, percent, soak, approval}), got %s", at, kindOf(v))
		return nil
	}
	if len(l) == 0 {
		p.addf("%s: empty: list at least one wave, e.g. {name: canary, namespaces: [team-canary]}", at)
		return nil
	}
	var out []Wave
	names := map[string]int{}
	for i, e := range l {
		wat := fmt.Sprintf("%s[%d]", at, i)
		m, ok := p.object(e, wat, "a wave {name, selector, namespaces, percent, soak, approval}", waveFields...)
		if !ok {
			continue
		}
		w := Wave{Name: fmt.Sprintf("wave-%d", i+1), Soak: soak}
		if nv, present := m["name"]; present {
			s, ok := nv.(string)
			switch {
			case !ok:
				p.addf("%s.name: expected a string, got %s", wat, kindOf(nv))
			case len(validation.IsDNS1123Label(s)) > 0:
				p.addf("%s.name: %q is not a valid wave name (lower-case letters, digits and '-', at most 63)", wat, s)
			default:
				w.Name = s
			}
		}
		if first, dup := names[w.Name]; dup {
			p.addf("%s.name: %q is the name of wave %d already; wave names are unique", wat, w.Name, first)
		}
		names[w.Name] = i
		if sv, present := m["selector"]; present {
			s, ok := sv.(string)
			switch {
			case !ok:
				p.addf("%s.selector: expected a label selector string, got %s", wat, kindOf(sv))
			case strings.TrimSpace(s) == "":
				p.addf("%s.selector: empty; leave it out to take the rest", wat)
			default:
				sel, err := labels.Parse(s)
				if err != nil {
					p.addf("%s.selector: invalid selector %q: %v (Kubernetes label-selector syntax over the InstanceGroups' labels, e.g. 'rollout=canary')", wat, s, err)
				} else {
					w.Selector, w.selector = s, sel
				}
			}
		}
		if nv, present := m["namespaces"]; present {
			nl, ok := nv.([]any)
			if !ok || len(nl) == 0 {
				p.addf("%s.namespaces: expected a non-empty list of namespace names, got %s", wat, describeEmpty(nv))
			}
			for j, x := range nl {
				s, ok := x.(string)
				if !ok {
					p.addf("%s.namespaces[%d]: expected a namespace name, got %s", wat, j, kindOf(x))
					continue
				}
				if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
					p.addf("%s.namespaces[%d]: %q is not a namespace name: %s", wat, j, s, strings.Join(msgs, "; "))
					continue
				}
				w.Namespaces = append(w.Namespaces, s)
			}
		}
		if pv, present := m["percent"]; present {
			w.Percent = p.intIn(pv, wat+".percent", 1, 100)
			if _, sel := m["selector"]; sel {
				p.addf("%s: selects by percent and by selector; a wave takes a percentage of the rest or the groups a selector/namespaces match, not both", wat)
			} else if _, ns := m["namespaces"]; ns {
				p.addf("%s: selects by percent and by namespaces; a wave takes a percentage of the rest or the groups a selector/namespaces match, not both", wat)
			}
		}
		if sv, present := m["soak"]; present {
			w.Soak = p.duration(sv, wat+".soak", true)
		}
		if av, present := m["approval"]; present {
			switch av {
			case ApprovalManual:
				w.Approval = ApprovalManual
			case "automatic":
			default:
				p.addf("%s.approval: %v is not an approval (valid: manual, the wave starts once the admin approves it; automatic, the default)", wat, av)
			}
		}
		_, s1 := m["selector"]
		_, s2 := m["namespaces"]
		_, s3 := m["percent"]
		if !s1 && !s2 && !s3 && i != len(l)-1 {
			p.addf("%s: selects neither by selector, namespaces nor percent, so it takes every remaining group; only the last wave may (the waves after it would be empty)", wat)
		}
		out = append(out, w)
	}
	if len(out) > 0 && !out[len(out)-1].TakesRest() {
		if _, taken := names[RestWave]; taken {
			p.addf("%s: the last wave selects some groups only, so an implicit wave %q takes the rest; the name %q is taken, rename that wave", at, RestWave, RestWave)
		}
		out = append(out, Wave{Name: RestWave, Soak: soak})
	}
	return out
}

func describeEmpty(v any) string {
	if l, ok := v.([]any); ok && len(l) == 0 {
		return "an empty list"
	}
	return kindOf(v)
}

var failureFields = []string{"groupError", "startupTimeout", "maxUnhealthyPercent", "podNotReadyAfter", "maxContainerRestarts"}

// maxRestartsLimit bounds failure.maxContainerRestarts (a kubelet's
// restartCount is an int32).
const maxRestartsLimit = math.MaxInt32

func (p *parser) failure(f *FailureCriteria, v any, at string) {
	m, ok := p.object(v, at, "an object with groupError, startupTimeout, maxUnhealthyPercent, podNotReadyAfter and maxContainerRestarts", failureFields...)
	if !ok {
		return
	}
	if gv, present := m["groupError"]; present {
		if b, ok := gv.(bool); ok {
			f.GroupError = b
		} else {
			p.addf("%s.groupError: expected true or false, got %s", at, kindOf(gv))
		}
	}
	if tv, present := m["startupTimeout"]; present {
		if d := p.duration(tv, at+".startupTimeout", false); d > 0 {
			f.StartupTimeout = d
		}
	}
	if uv, present := m["maxUnhealthyPercent"]; present {
		if n := p.intIn(uv, at+".maxUnhealthyPercent", 0, 100); n >= 0 {
			f.MaxUnhealthyPercent = n
		}
	}
	if pv, present := m["podNotReadyAfter"]; present {
		f.PodNotReadyAfter = p.duration(pv, at+".podNotReadyAfter", true)
	}
	if rv, present := m["maxContainerRestarts"]; present {
		if n := p.intIn(rv, at+".maxContainerRestarts", 0, maxRestartsLimit); n >= 0 {
			f.MaxContainerRestarts, f.LimitRestarts = n, true
		}
	}
}

// intIn parses an integer from lo to hi; -1 (and a problem) otherwise.
func (p *parser) intIn(v any, at string, lo, hi int64) int {
	n, ok := v.(int64)
	switch {
	case !ok:
		p.addf("%s: expected an integer from %d to %d, got %s", at, lo, hi, kindOf(v))
	case n < lo || n > hi:
		p.addf("%s: %d is out of range (valid: an integer from %d to %d)", at, n, lo, hi)
	default:
		return int(n)
	}
	return -1
}

// duration parses a Go duration string ("90s", "10m", "1h30m"); zeroOK
// allows 0 (written 0 or "0s").
func (p *parser) duration(v any, at string, zeroOK bool) time.Duration {
	valid := "a duration such as 30s, 10m or 1h"
	if zeroOK {
		valid += ", or 0 for none"
	}
	switch x := v.(type) {
	case int64:
		if x == 0 && zeroOK {
			return 0
		}
		p.addf("%s: %d has no unit (valid: %s)", at, x, valid)
	case string:
		d, err := time.ParseDuration(x)
		switch {
		case err != nil:
			p.addf("%s: %q is not a duration (valid: %s)", at, x, valid)
		case d < 0 || (d == 0 && !zeroOK):
			p.addf("%s: %q is out of range (valid: %s)", at, x, valid)
		default:
			return d
		}
	default:
		p.addf("%s: expected %s, got %s", at, valid, kindOf(x))
	}
	return 0
}

// revisionLength is how many hex digits of the SHA-256 name a revision.
const revisionLength = 10

// Revision names a version of the boundary ConfigMap's data: the first
// hex digits of a SHA-256 over its keys and values, leaving out the
// rollout key (which says how a revision rolls out, not what it is), the
// drains key (how drains end, which applies at once and changes no
// group) and blank values (which Parse treats as absent). The same data always gives
// the same revision, so reverting the ConfigMap returns to the revision
// it had.
func Revision(data map[string]string) string {
	kept := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if k == KeyRollout || k == KeyDrains || strings.TrimSpace(data[k]) == "" {
			continue
		}
		kept[k] = data[k]
	}
	raw, _ := json.Marshal(kept) // strings only: cannot fail; keys sorted
	sum := sha256.Sum256(append([]byte("instancemgr.keikoproj.io/boundaries-revision/v1\n"), raw...))
	return hex.EncodeToString(sum[:])[:revisionLength]
}
