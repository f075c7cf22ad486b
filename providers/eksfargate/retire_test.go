package eksfargate

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// fakeDisruptions answers as the controller would: admitted or not, and
// the eviction of each profile's pods (LabelProfile value) done or not.
type fakeDisruptions struct {
	admit   bool
	evicted map[string]providers.Retirement
	asked   []string
}

func (f *fakeDisruptions) Admit(context.Context) (bool, error) {
	f.asked = append(f.asked, "Admit")
	return f.admit, nil
}

func (f *fakeDisruptions) DrainNodes(_ context.Context, key, value string) (providers.Retirement, error) {
	f.asked = append(f.asked, "DrainNodes "+key+"="+value)
	return providers.Retirement{Done: true}, nil
}

func (f *fakeDisruptions) EvictPods(_ context.Context, key, value string) (providers.Retirement, error) {
	f.asked = append(f.asked, "EvictPods "+key+"="+value)
	return f.evicted[value], nil
}

// A profile replacement starts and goes on only with an upgrade slot; the
// old profile is deleted only once the controller evicted its pods.
func TestApplyAsksForASlotAndEvictsBeforeItDeletes(t *testing.T) {
	blocked := providers.Retirement{Message: "draining fargate-ip-1", Blocked: "node fargate-ip-1 could not be drained within 10m0s"}
	cases := []struct {
		name string
		// active: the new profile is ACTIVE before the step under test.
		active bool
		admit  bool
		// evicted is the eviction of the old profile's pods (nil: not asked).
		evicted   *providers.Retirement
		wantCalls func(first, second string) []string
		wantObs   func(t *testing.T, obs *providers.Observation, first, second string)
	}{{
		name:      "no slot: no profile created, the group waits on its profile",
		wantCalls: func(_, _ string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, first, second string) {
			if !obs.WaitingForSlot || obs.GroupName != first || !obs.Active || obs.Updating ||
				!strings.Contains(obs.Message, "replacing Fargate profile(s) "+first+" with "+second) {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name:      "a slot: the new profile is created",
		admit:     true,
		wantCalls: func(_, second string) []string { return []string{"Create " + second} },
		wantObs: func(t *testing.T, obs *providers.Observation, _, second string) {
			if obs.WaitingForSlot || obs.GroupName != second || !obs.Updating {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name:      "new profile ACTIVE, old pods not evicted: the old profile stays, the block is reported",
		active:    true,
		admit:     true,
		evicted:   &providers.Retirement{Message: "draining fargate-ip-1"},
		wantCalls: func(_, _ string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, first, _ string) {
			if !obs.Updating || !strings.Contains(obs.Message, "evicting the pods of Fargate profile "+first+" before deleting it") {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name:      "new profile ACTIVE, old pods blocked by a budget: reported, kept",
		active:    true,
		admit:     true,
		evicted:   &blocked,
		wantCalls: func(_, _ string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, _, _ string) {
			if obs.Blocked != blocked.Blocked {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name:      "new profile ACTIVE, old profile empty: deleted",
		active:    true,
		admit:     true,
		evicted:   &providers.Retirement{Done: true},
		wantCalls: func(first, _ string) []string { return []string{"Delete " + first} },
		wantObs: func(t *testing.T, obs *providers.Observation, _, _ string) {
			if !obs.Updating || obs.Blocked != "" {
				t.Errorf("observation %+v", obs)
			}
		},
	}, {
		name:      "replacement under way without the slot: nothing evicted or deleted",
		active:    true,
		evicted:   &providers.Retirement{Done: true},
		wantCalls: func(_, _ string) []string { return nil },
		wantObs: func(t *testing.T, obs *providers.Observation, first, _ string) {
			if !obs.WaitingForSlot || obs.GroupName != first {
				t.Errorf("observation %+v", obs)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, f := newProvisioner()
			ig := batchGroup()
			ctx := func(d providers.Disruptions) context.Context {
				return providers.WithDisruptions(context.Background(), d)
			}
			obs, err := p.Apply(ctx(&fakeDisruptions{admit: true}), ig)
			if err != nil {
				t.Fatal(err)
			}
			first := obs.GroupName
			f.settle()
			ig.Status.Provisioner, ig.Status.ActiveScalingGroupName = v1alpha1.ProvisionerEKSFargate, first
			ig.Spec.EKSFargate.Selectors[0].Labels["tier"] = "batch-v2"
			second := ""
			if tc.active {
				if obs, err = p.Apply(ctx(&fakeDisruptions{admit: true}), ig); err != nil {
					t.Fatal(err)
				}
				second = obs.GroupName
				f.settle()
			}
			f.takeCalls()
			d := fakeDisruptions{admit: tc.admit, evicted: map[string]providers.Retirement{}}
			if tc.evicted != nil {
				d.evicted[first] = *tc.evicted
			}
			if obs, err = p.Apply(ctx(&d), ig); err != nil {
				t.Fatal(err)
			}
			if second == "" && !obs.WaitingForSlot {
				second = obs.GroupName
			}
			if second == "" {
				second = profileName(ig, newShape("arn:aws:iam::123456789012:role/pods", []string{"subnet-a", "subnet-b"}, ig.Spec.EKSFargate.Selectors))
			}
			if got, want := f.takeCalls(), tc.wantCalls(first, second); !reflect.DeepEqual(got, want) {
				t.Errorf("calls %v, want %v (asked %v)", got, want, d.asked)
			}
			tc.wantObs(t, obs, first, second)
		})
	}
}
