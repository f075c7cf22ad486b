package upgrade

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/providers"
)

// zoneBalancer picks, one at a time, the instances to terminate with a
// capacity decrement so that the group stays balanced across its
// Availability Zones: each pick comes from the zone holding the most of
// the group's instances at that point. Auto Scaling's AZRebalance would
// otherwise even out a group left unbalanced by launching in one zone and
// terminating in another, without a drain ("If you decrement the desired
// capacity, your Auto Scaling group can become unbalanced between
// Availability Zones ... rebalancing might terminate instances in other
// zones", TerminateInstanceInAutoScalingGroup, Amazon EC2 Auto Scaling API
// Reference).
//
// Ties between zones go to the zone of the group's most recently launched
// instance (where a surge landed); within a zone, drifted instances come
// first, then those that serve nothing (no node, a node not Ready, or
// unhealthy in Auto Scaling), then the oldest by launch time, then by id
// (so a restarted controller picks the same ones).
type zoneBalancer struct {
	count  map[string]int       // the group's instances per zone, picks removed
	newest map[string]time.Time // the latest launch time per zone
	left   []providers.Instance // candidates not picked yet
	nodes  map[string]*corev1.Node
}

// newZoneBalancer balances members (the group's instances not
// terminating) and picks among candidates (a subset of them); nodes maps
// providerID to Node.
func newZoneBalancer(members, candidates []providers.Instance, nodes map[string]*corev1.Node) *zoneBalancer {
	b := &zoneBalancer{count: map[string]int{}, newest: map[string]time.Time{}, nodes: nodes,
		left: append([]providers.Instance(nil), candidates...)}
	for _, in := range members {
		z := in.Zone()
		b.count[z]++
		if in.LaunchTime.After(b.newest[z]) {
			b.newest[z] = in.LaunchTime
		}
	}
	return b
}

// next returns the best remaining candidate that ok accepts (nil ok
// accepts every one) and counts it out of its zone; false when none is
// left.
func (b *zoneBalancer) next(ok func(providers.Instance) bool) (providers.Instance, bool) {
	best := -1
	for i, in := range b.left {
		if ok != nil && !ok(in) {
			continue
		}
		if best < 0 || b.before(in, b.left[best]) {
			best = i
		}
	}
	if best < 0 {
		return providers.Instance{}, false
	}
	in := b.left[best]
	b.left = append(b.left[:best], b.left[best+1:]...)
	b.count[in.Zone()]--
	return in, true
}

// before reports whether a goes before c (see zoneBalancer).
func (b *zoneBalancer) before(a, c providers.Instance) bool {
	za, zc := a.Zone(), c.Zone()
	if za != zc {
		if b.count[za] != b.count[zc] {
			return b.count[za] > b.count[zc]
		}
		if !b.newest[za].Equal(b.newest[zc]) {
			return b.newest[za].After(b.newest[zc])
		}
		return za < zc
	}
	if a.UpToDate != c.UpToDate {
		return !a.UpToDate
	}
	if ua, uc := unavailable(a, b.nodes), unavailable(c, b.nodes); ua != uc {
		return ua
	}
	if !a.LaunchTime.Equal(c.LaunchTime) {
		return a.LaunchTime.Before(c.LaunchTime)
	}
	return a.ID < c.ID
}

// members returns the group's instances that are not terminating: the
// ones Auto Scaling counts when it balances the group.
func members(obs *providers.Observation) []providers.Instance {
	var out []providers.Instance
	for _, in := range obs.Instances {
		if !strings.HasPrefix(in.LifecycleState, "Terminating") {
			out = append(out, in)
		}
	}
	return out
}

// zoneCount counts a group's instances per Availability Zone.
type zoneCount map[string]int

func newZoneCount(members []providers.Instance) zoneCount {
	c := zoneCount{}
	for _, in := range members {
		c[in.Zone()]++
	}
	return c
}

// fullest reports whether zone holds as many instances as the fullest
// zone: taking one from it (a terminate with a decrement) cannot leave
// the group less balanced.
func (c zoneCount) fullest(zone string) bool {
	for _, n := range c {
		if n > c[zone] {
			return false
		}
	}
	return true
}
