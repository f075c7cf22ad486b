package eksmanaged

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// A node group that ends in CREATE_FAILED (EKS never retries it) is said
// so, with EKS's health issues, in the observation and one Warning Event,
// deleted after the backoff, and created again once gone; a second failure
// waits twice as long.
func TestCreateFailedNodegroupIsDeletedAndCreatedAgainWithBackoff(t *testing.T) {
	e := newEnv()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e.p.failures = providers.CreateFailures{Base: time.Minute, Max: 10 * time.Minute, Now: func() time.Time { return now }}
	var events []string
	ctx := providers.WithEvents(context.Background(), func(typ, reason, msg string) { events = append(events, typ+" "+reason+": "+msg) })
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	apply := func() *providers.Observation {
		t.Helper()
		obs, err := e.p.Apply(ctx, ig)
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		record(ig, obs) // the status, as the reconciler stores it
		return obs
	}
	restart := func() { // a new controller: nothing but the stored status
		e.p = New(e.p.aws, nil, e.nodes, Options{})
		e.p.failures = providers.CreateFailures{Base: time.Minute, Max: 10 * time.Minute, Now: func() time.Time { return now }}
	}
	fail := func(created time.Time) {
		ng := e.eks.groups[ngName]
		ng.Status = ekstypes.NodegroupStatusCreateFailed
		ng.CreatedAt = awssdk.Time(created)
		ng.Health = &ekstypes.NodegroupHealth{Issues: []ekstypes.Issue{{Code: ekstypes.NodegroupIssueCodeAsgInstanceLaunchFailures,
			Message: awssdk.String("Could not launch On-Demand Instances. InsufficientInstanceCapacity")}}}
	}

	apply()
	e.eks.takeCalls()
	fail(now)
	for i, step := range []struct {
		advance time.Duration
		restart bool
		calls   []string
		message string
		events  int
	}{
		{0, false, nil, "deleting it to create it again in 1m0s", 1},
		{30 * time.Second, false, nil, "in 30s", 1}, // one Event per failed node group
		{10 * time.Second, true, nil, "in 20s", 1},  // a restarted controller goes on waiting, no new Event
		{20 * time.Second, false, []string{"DeleteNodegroup " + ngName}, "deleting it to create it again (failure 1 in a row)", 1},
	} {
		now = now.Add(step.advance)
		if step.restart {
			restart()
		}
		obs := apply()
		if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, step.calls) {
			t.Fatalf("step %d: calls %v, want %v", i, calls, step.calls)
		}
		if obs.Active || !strings.Contains(obs.Message, "AsgInstanceLaunchFailures: Could not launch On-Demand Instances") || !strings.Contains(obs.Message, step.message) {
			t.Fatalf("step %d: observation %+v, want a message with the health issue and %q", i, obs, step.message)
		}
		if len(events) != step.events || !strings.HasPrefix(events[0], "Warning "+providers.ReasonCreateFailed) {
			t.Fatalf("step %d: events %q", i, events)
		}
	}
	e.eks.settle() // the deletion ends
	apply()
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"CreateNodegroup " + ngName}) {
		t.Fatalf("calls once the failed node group is gone: %v, want it created again", calls)
	}
	if ig.Status.CreateFailure == nil || ig.Status.CreateFailure.Attempts != 1 {
		t.Fatalf("while created again the record is %+v, want it kept (1 failure)", ig.Status.CreateFailure)
	}
	// Created again, failed again, after a restart: twice the wait, a
	// second Event.
	restart()
	fail(now.Add(time.Second))
	obs := apply()
	if !strings.Contains(obs.Message, "in 2m0s (failure 2 in a row)") || len(events) != 2 {
		t.Fatalf("second failure: %q, events %q", obs.Message, events)
	}
	// ACTIVE at last: the record is cleared.
	e.eks.groups[ngName].Status = ekstypes.NodegroupStatusActive
	if apply(); ig.Status.CreateFailure != nil {
		t.Fatalf("record %+v once ACTIVE, want none", ig.Status.CreateFailure)
	}
}

// A node group can fail creation after some of its nodes joined (a
// partial launch): they are drained through the controller's drain path
// before DeleteNodegroup is sent, and a blocked drain is said so and
// never forced.
func TestCreateFailedNodegroupIsDeletedOnlyOnceItsNodesAreDrained(t *testing.T) {
	e := newEnv()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e.p.failures = providers.CreateFailures{Base: time.Minute, Max: 10 * time.Minute, Now: func() time.Time { return now }}
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	blocked := providers.Retirement{Message: "draining node ng-0", Blocked: "node ng-0 could not be drained within 10m0s: apps/web-1: eviction refused"}
	d := &fakeDisruptions{admit: true, drained: map[string]providers.Retirement{ngName: blocked}}
	e.applyWith(t, ig, d)
	ng := e.eks.groups[ngName]
	ng.Status = ekstypes.NodegroupStatusCreateFailed
	ng.CreatedAt = awssdk.Time(now)
	e.applyWith(t, ig, d) // the first sighting starts the backoff
	now = now.Add(time.Hour)

	d.asked = nil
	obs, calls := e.applyWith(t, ig, d)
	if len(calls) != 0 {
		t.Fatalf("calls while the failed node group's nodes drain: %v, want none", calls)
	}
	if !reflect.DeepEqual(d.asked, []string{"DrainNodes " + LabelNodegroup + "=" + ngName}) {
		t.Fatalf("asked %v, want the failed node group's nodes drained", d.asked)
	}
	if obs.Blocked != blocked.Blocked || !strings.Contains(obs.Message, "draining its nodes before deleting it") {
		t.Fatalf("observation %+v, want the blocked drain said", obs)
	}

	d.drained[ngName] = providers.Retirement{Done: true}
	if _, calls := e.applyWith(t, ig, d); !reflect.DeepEqual(calls, []string{"DeleteNodegroup " + ngName}) {
		t.Fatalf("calls once drained: %v, want the failed node group deleted", calls)
	}
}
