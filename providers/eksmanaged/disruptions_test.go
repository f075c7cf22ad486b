package eksmanaged

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// fakeDisruptions answers as the controller would: admitted or not, and
// the retirement drain of each node group (LabelNodegroup value) done or
// not; it records what it was asked.
type fakeDisruptions struct {
	admit   bool
	drained map[string]providers.Retirement
	asked   []string
}

func (f *fakeDisruptions) Admit(context.Context) (bool, error) {
	f.asked = append(f.asked, "Admit")
	return f.admit, nil
}

func (f *fakeDisruptions) DrainNodes(_ context.Context, key, value string) (providers.Retirement, error) {
	f.asked = append(f.asked, "DrainNodes "+key+"="+value)
	return f.drained[value], nil
}

func (f *fakeDisruptions) EvictPods(_ context.Context, key, value string) (providers.Retirement, error) {
	f.asked = append(f.asked, "EvictPods "+key+"="+value)
	return providers.Retirement{Done: true}, nil
}

// applyWith applies with d in the context, records the status and returns
// the observation and the mutating EKS calls.
func (e *env) applyWith(t *testing.T, ig *v1alpha1.InstanceGroup, d providers.Disruptions) (*providers.Observation, []string) {
	t.Helper()
	obs, err := e.p.Apply(providers.WithDisruptions(context.Background(), d), ig)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	record(ig, obs)
	return obs, e.eks.takeCalls()
}

// A replacement (blue/green) and a version update start only with an
// upgrade slot; the old node group is deleted only once the controller
// drained its nodes.
func TestApplyAsksForASlotAndADrainBeforeItDisrupts(t *testing.T) {
	blocked := providers.Retirement{Message: "draining node old-0", Blocked: "node old-0 could not be drained within 10m0s: apps/web-1: eviction refused"}
	cases := []struct {
		name string
		// setup brings the group to the step under test and returns the
		// replacement node group's name ("" for a version update).
		setup     func(t *testing.T, e *env, ig *v1alpha1.InstanceGroup) string
		d         fakeDisruptions
		wantCalls func(next string) []string
		wantObs   func(t *testing.T, obs *providers.Observation, next string)
	}{{
		name: "shape change without a slot: nothing is created, the group waits on its node group",
		setup: func(_ *testing.T, _ *env, ig *v1alpha1.InstanceGroup) string {
			return withInstanceType(ig, "m5.xlarge")
		},
		d:         fakeDisruptions{admit: false},
		wantCalls: func(string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, next string) {
			if !obs.WaitingForSlot || obs.GroupName != ngName || !obs.Active || obs.Updating || obs.Retiring != nil ||
				!strings.Contains(obs.Message, "replacing EKS node group "+ngName+" with "+next) || !strings.Contains(obs.Message, "waiting for an upgrade slot") {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "shape change with a slot: the replacement is created",
		setup: func(_ *testing.T, _ *env, ig *v1alpha1.InstanceGroup) string {
			return withInstanceType(ig, "m5.xlarge")
		},
		d:         fakeDisruptions{admit: true},
		wantCalls: func(next string) []string { return []string{"CreateNodegroup " + next} },
		wantObs: func(t *testing.T, obs *providers.Observation, next string) {
			if obs.WaitingForSlot || obs.GroupName != next || !obs.Updating {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "replacement ACTIVE, old nodes not drained: no DeleteNodegroup, the blocked drain is reported",
		setup: func(t *testing.T, e *env, ig *v1alpha1.InstanceGroup) string {
			next := withInstanceType(ig, "m5.xlarge")
			e.applyWith(t, ig, &fakeDisruptions{admit: true})
			e.eks.settle()
			return next
		},
		d: fakeDisruptions{admit: true, drained: map[string]providers.Retirement{ngName: blocked}},
		// The old node group is frozen (max = its desired size) before
		// its drain (review N8); its scaling is checked in
		// TestRetiringNodegroupIsFrozenBeforeItsDrain.
		wantCalls: func(string) []string { return []string{"UpdateNodegroupConfig"} },
		wantObs: func(t *testing.T, obs *providers.Observation, next string) {
			if !obs.Updating || obs.Blocked != blocked.Blocked || !strings.Contains(obs.Message, "draining "+ngName+" before deleting: draining node old-0") {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "replacement ACTIVE, old nodes drained: DeleteNodegroup",
		setup: func(t *testing.T, e *env, ig *v1alpha1.InstanceGroup) string {
			next := withInstanceType(ig, "m5.xlarge")
			e.applyWith(t, ig, &fakeDisruptions{admit: true})
			e.eks.settle()
			return next
		},
		d: fakeDisruptions{admit: true, drained: map[string]providers.Retirement{ngName: {Done: true}}},
		// Frozen (review N8), then deleted.
		wantCalls: func(string) []string { return []string{"UpdateNodegroupConfig", "DeleteNodegroup " + ngName} },
		wantObs: func(t *testing.T, obs *providers.Observation, next string) {
			if !obs.Updating || obs.Blocked != "" || !strings.Contains(obs.Message, "deleting "+ngName+" (their nodes are drained)") {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "replacement under way and the slot not held (lost): nothing is drained or deleted",
		setup: func(t *testing.T, e *env, ig *v1alpha1.InstanceGroup) string {
			next := withInstanceType(ig, "m5.xlarge")
			e.applyWith(t, ig, &fakeDisruptions{admit: true})
			e.eks.settle()
			return next
		},
		d:         fakeDisruptions{admit: false, drained: map[string]providers.Retirement{ngName: {Done: true}}},
		wantCalls: func(string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, next string) {
			if !obs.WaitingForSlot || obs.GroupName != ngName {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "version update without a slot: not sent",
		setup: func(_ *testing.T, _ *env, ig *v1alpha1.InstanceGroup) string {
			ig.Spec.EKSManaged.Configuration.Version = "1.30"
			return ""
		},
		d:         fakeDisruptions{admit: false},
		wantCalls: func(string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, _ string) {
			if !obs.WaitingForSlot || obs.Updating || obs.GroupName != ngName || !strings.Contains(obs.Message, "version") {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name: "version update with a slot: sent",
		setup: func(_ *testing.T, _ *env, ig *v1alpha1.InstanceGroup) string {
			ig.Spec.EKSManaged.Configuration.Version = "1.30"
			return ""
		},
		d:         fakeDisruptions{admit: true},
		wantCalls: func(string) []string { return []string{"UpdateNodegroupVersion 1.30 "} },
		wantObs: func(t *testing.T, obs *providers.Observation, _ string) {
			if obs.WaitingForSlot || !obs.Updating {
				t.Errorf("observation %+v", obs)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large", Version: "1.29"})
			e.applyWith(t, ig, &fakeDisruptions{admit: true})
			e.eks.settle()
			if obs, calls := e.applyWith(t, ig, &fakeDisruptions{admit: true}); !obs.Active || calls != nil {
				t.Fatalf("first node group not settled: %+v, calls %v", obs, calls)
			}
			next := tc.setup(t, e, ig)
			d := tc.d
			obs, calls := e.applyWith(t, ig, &d)
			if want := tc.wantCalls(next); !reflect.DeepEqual(calls, want) {
				t.Errorf("calls %v, want %v (asked %v)", calls, want, d.asked)
			}
			tc.wantObs(t, obs, next)
		})
	}
}
