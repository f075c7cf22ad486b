package eks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// tagLaunchVersion is the tag EC2 puts on an instance launched from a
// launch template: the version it was launched from.
const tagLaunchVersion = "aws:ec2launchtemplate:version"

// notVisibleFor is how long after the controller first sees an instance id
// (in its Auto Scaling group's listing) EC2 may still answer
// InvalidInstanceID.NotFound for it: EC2 API Reference, "Eventual
// consistency in the Amazon EC2 API" ("If you call DescribeInstances
// immediately after RunInstances, the instance might not be visible yet").
const notVisibleFor = time.Minute

// instanceIDPattern finds the ids an InvalidInstanceID.NotFound names
// ("The instance ID 'i-0abc' does not exist", "The instance IDs 'i-1, i-2'
// do not exist").
var instanceIDPattern = regexp.MustCompile(`i-[0-9a-f]+`)

// launchedVersions remembers which launch template version each instance
// was launched from (EC2 DescribeInstances, tag aws:ec2launchtemplate:version)
// and its private DNS name (the name its Node must have), launch time,
// subnet, market and purchase-options tag (placement).
// The answers never change for an instance, so each is looked up once.
// Drift is judged from it rather than from the Auto Scaling group's view of
// the instance, which an emulator may report as the template's current
// default version.
type launchedVersions struct {
	api awsp.EC2API

	mu       sync.Mutex
	byID     map[string]string
	dns      map[string]string
	launched map[string]time.Time
	// placed is where and how each instance was launched (its subnet,
	// market and purchase-options tag): placementDrift judges it.
	placed map[string]placement
	// inService holds the instances whose launch time was read while they
	// were InService (startedInService).
	inService map[string]bool
	// firstAsked is when each id was first looked up (notVisibleFor).
	firstAsked map[string]time.Time
	// now is the clock (tests); default time.Now.
	now func() time.Time
}

// launchTimes returns the launch time of each instance id looked up so
// far (lookup fills it).
func (l *launchedVersions) launchTimes(ids []string) map[string]time.Time {
	return known(l, func() map[string]time.Time { return l.launched }, ids)
}

// dnsNames returns the private DNS name of each instance id looked up so
// far (lookup fills it).
func (l *launchedVersions) dnsNames(ids []string) map[string]string {
	return known(l, func() map[string]string { return l.dns }, ids)
}

// placements returns where and how each instance id looked up so far was
// launched (lookup fills it).
func (l *launchedVersions) placements(ids []string) map[string]placement {
	return known(l, func() map[string]placement { return l.placed }, ids)
}

// known returns the entries for ids of the cache that cache names (read
// under l's lock: lookup replaces the maps); ids not looked up yet are
// left out.
func known[T any](l *launchedVersions, cache func() map[string]T, ids []string) map[string]T {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := cache()
	out := make(map[string]T, len(ids))
	for _, id := range ids {
		if v, ok := m[id]; ok {
			out[id] = v
		}
	}
	return out
}

// lookup returns the launch version of each instance id (ids it cannot
// tell are absent). Errors come from DescribeInstances.
func (l *launchedVersions) lookup(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	var missing []string
	l.mu.Lock()
	for _, id := range ids {
		switch v, ok := l.byID[id]; {
		case !ok:
			missing = append(missing, id)
		case v != "": // "": read, carries no version tag
			out[id] = v
		}
	}
	l.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	found, err := l.describe(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, v := range found {
		out[id] = v
	}
	return out, nil
}

// describe reads ids from EC2 (DescribeInstances) and stores their launch
// versions, DNS names and launch times. It returns the launch versions
// found (ids without the tag are absent).
//
// An id EC2 does not know yet (InvalidInstanceID.NotFound, which fails the
// whole call) that was first looked up less than notVisibleFor ago is "not
// visible yet": it is left out, absent from the answer and looked up again
// next time, and the others are read again without it. Older unknown ids
// fail the call.
func (l *launchedVersions) describe(ctx context.Context, ids []string) (map[string]string, error) {
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	l.mu.Lock()
	if l.firstAsked == nil {
		l.firstAsked = map[string]time.Time{}
	}
	for _, id := range ids {
		if _, ok := l.firstAsked[id]; !ok {
			l.firstAsked[id] = now()
		}
	}
	l.mu.Unlock()
	for {
		found, err := l.read(ctx, ids)
		if err == nil || len(ids) == 0 {
			return found, err
		}
		fresh := l.notVisible(err, ids, now())
		if len(fresh) == 0 {
			return nil, err
		}
		ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(fresh, id) })
		if len(ids) == 0 {
			return map[string]string{}, nil
		}
	}
}

// notVisible returns the ids of an InvalidInstanceID.NotFound err when
// every one it names is among ids and was first looked up less than
// notVisibleFor before now; otherwise none (the error stands).
func (l *launchedVersions) notVisible(err error, ids []string, now time.Time) []string {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidInstanceID.NotFound" {
		return nil
	}
	named := instanceIDPattern.FindAllString(ae.ErrorMessage(), -1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range named {
		first, ok := l.firstAsked[id]
		if !slices.Contains(ids, id) || !ok || now.Sub(first) >= notVisibleFor {
			return nil
		}
	}
	return named
}

// read is one DescribeInstances of ids (paginated) that stores what it
// finds (see describe).
func (l *launchedVersions) read(ctx context.Context, ids []string) (map[string]string, error) {
	p := ec2.NewDescribeInstancesPaginator(l.api, &ec2.DescribeInstancesInput{InstanceIds: ids})
	found, dns, launched := map[string]string{}, map[string]string{}, map[string]time.Time{}
	answered := map[string]bool{}
	placed := map[string]placement{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeInstances %v: %w", ids, err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				answered[awssdk.ToString(in.InstanceId)] = true
				if n := awssdk.ToString(in.PrivateDnsName); n != "" {
					dns[awssdk.ToString(in.InstanceId)] = n
				}
				if in.LaunchTime != nil {
					launched[awssdk.ToString(in.InstanceId)] = *in.LaunchTime
				}
				placed[awssdk.ToString(in.InstanceId)] = placementOf(in)
				for _, t := range in.Tags {
					if awssdk.ToString(t.Key) == tagLaunchVersion {
						found[awssdk.ToString(in.InstanceId)] = awssdk.ToString(t.Value)
					}
				}
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID, l.dns, l.launched = map[string]string{}, map[string]string{}, map[string]time.Time{}
	}
	if l.placed == nil {
		l.placed = map[string]placement{}
	}
	for id, pl := range placed {
		l.placed[id] = pl
	}
	for id, t := range launched {
		l.launched[id] = t
	}
	for id := range answered {
		// An instance launched without the tag (attached to the group, or
		// from a launch configuration) never gets it: remembered as ""
		// so that it is not read again at every pass.
		l.byID[id] = found[id]
	}
	for id, n := range dns {
		l.dns[id] = n
	}
	return found, nil
}

// startedInService re-reads, once per instance, the launch time of each
// of ids that is InService: EC2's LaunchTime is the instance's last start,
// and Auto Scaling starts a stopped warm-pool instance when it puts it in
// service, after lookup may have read (and kept) the time it was launched
// into the pool (warmPools.hold). Node health's startup timeout runs from
// this time. Only groups with a warm pool need it; errors come from
// DescribeInstances.
func (l *launchedVersions) startedInService(ctx context.Context, ids []string) error {
	l.mu.Lock()
	var stale []string
	for _, id := range ids {
		if !l.inService[id] {
			stale = append(stale, id)
		}
	}
	l.mu.Unlock()
	if len(stale) == 0 {
		return nil
	}
	if _, err := l.describe(ctx, stale); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inService == nil {
		l.inService = map[string]bool{}
	}
	for _, id := range stale {
		if _, read := l.launched[id]; read { // not when not visible yet
			l.inService[id] = true
		}
	}
	return nil
}

// forgetGone drops from the instances looked up those no listing shows
// any more (terminated, or in a group no longer listed), once every
// cluster has been listed, so the cache follows the fleet rather than
// its history (review 2026-11-29 L2). An id dropped while still in use
// is only read again.
func (p *Provisioner) forgetGone() {
	p.mu.Lock()
	caches := slices.Collect(maps.Values(p.groups))
	p.mu.Unlock()
	keep := map[string]bool{}
	for _, c := range caches {
		groups, at := c.Listed()
		if at.IsZero() {
			return
		}
		for _, g := range groups {
			for _, in := range g.Instances {
				keep[awssdk.ToString(in.InstanceId)] = true
			}
		}
	}
	p.launched.forget(keep)
}

// forget drops instances that are gone: those not in keep.
func (l *launchedVersions) forget(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.byID {
		if !keep[id] {
			delete(l.byID, id)
			delete(l.dns, id)
			delete(l.launched, id)
			delete(l.placed, id)
			delete(l.inService, id)
			delete(l.firstAsked, id)
		}
	}
	for id := range l.firstAsked { // looked up, never visible, gone
		if !keep[id] {
			delete(l.firstAsked, id)
		}
	}
}
