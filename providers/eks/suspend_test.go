package eks

import (
	"context"
	"slices"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// processRecorder records ResumeProcesses and SuspendProcesses calls.
type processRecorder struct {
	awsp.AutoScalingAPI
	resumed, suspended [][]string
}

func (p *processRecorder) ResumeProcesses(_ context.Context, in *autoscaling.ResumeProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.ResumeProcessesOutput, error) {
	p.resumed = append(p.resumed, in.ScalingProcesses)
	return &autoscaling.ResumeProcessesOutput{}, nil
}

func (p *processRecorder) SuspendProcesses(_ context.Context, in *autoscaling.SuspendProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	p.suspended = append(p.suspended, in.ScalingProcesses)
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func instance(id, version, state string) astypes.Instance {
	return astypes.Instance{InstanceId: awssdk.String(id), LifecycleState: astypes.LifecycleState(state),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{Version: awssdk.String(version)}}
}

// A group rotates (AZRebalance suspended) while it has an instance of an
// older launch template version that is not terminating, or a surge
// recorded; both read from state that outlives a restart.
func TestRotatingIsReadFromState(t *testing.T) {
	cases := []struct {
		name      string
		status    v1alpha1.InstanceGroupStatus
		instances []astypes.Instance
		versions  map[string]string
		want      bool
	}{
		{"all on the latest version", v1alpha1.InstanceGroupStatus{}, []astypes.Instance{instance("i-1", "3", "InService")}, nil, false},
		{"an old instance", v1alpha1.InstanceGroupStatus{}, []astypes.Instance{instance("i-1", "3", "InService"), instance("i-2", "2", "InService")}, nil, true},
		{"the old one terminating", v1alpha1.InstanceGroupStatus{}, []astypes.Instance{instance("i-1", "3", "InService"), instance("i-2", "2", "Terminating:Wait")}, nil, false},
		{"launched from an older version per EC2", v1alpha1.InstanceGroupStatus{}, []astypes.Instance{instance("i-1", "$Latest", "InService")}, map[string]string{"i-1": "2"}, true},
		{"a surge being given back", v1alpha1.InstanceGroupStatus{SurgeCapacity: 1}, []astypes.Instance{instance("i-1", "3", "InService")}, nil, true},
		{"a give-back marked", v1alpha1.InstanceGroupStatus{SurgeReturn: &v1alpha1.SurgeReturn{InstanceID: "i-9", Capacity: 1}}, nil, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ig := &v1alpha1.InstanceGroup{Status: c.status}
			if got := rotating(ig, c.instances, contentDrift(c.instances, c.versions, is("3"))); got != c.want {
				t.Errorf("rotating %v, want %v", got, c.want)
			}
		})
	}
}

// AZRebalance is suspended while rotating and resumed after, unless the
// spec suspends it; other processes are never resumed and suspended again
// on the way.
func TestAZRebalanceSuspendedWhileRotating(t *testing.T) {
	cases := []struct {
		name        string
		spec        []string
		have        []string
		rotating    bool
		wantResume  []string
		wantSuspend []string
	}{
		{"rotation starts", nil, nil, true, nil, []string{"AZRebalance"}},
		{"rotation goes on", nil, []string{"AZRebalance"}, true, nil, nil},
		{"rotation ends", nil, []string{"AZRebalance"}, false, []string{"AZRebalance"}, nil},
		{"rotation ends, the spec suspends it", []string{"AZRebalance"}, []string{"AZRebalance"}, false, nil, nil},
		{"rotation starts beside the spec's", []string{"ScheduledActions"}, []string{"ScheduledActions"}, true, nil, []string{"AZRebalance"}},
		{"rotation ends beside the spec's", []string{"ScheduledActions"}, []string{"ScheduledActions", "AZRebalance"}, false, []string{"AZRebalance"}, nil},
		{"the spec suspends all", []string{"All"}, nil, true, nil, []string{}},
		{"not rotating, nothing suspended", nil, nil, false, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("g")}
			for _, p := range c.have {
				g.SuspendedProcesses = append(g.SuspendedProcesses, astypes.SuspendedProcess{ProcessName: awssdk.String(p)})
			}
			api := &processRecorder{}
			cfg := &v1alpha1.EKSConfiguration{SuspendProcesses: c.spec}
			wrote, err := ensureSuspended(context.Background(), api, g, suspendedFor(cfg, c.rotating))
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, calls [][]string, want []string) {
				switch {
				case want == nil && len(calls) > 0:
					t.Errorf("%s %v, want no call", what, calls)
				case want != nil && (len(calls) != 1 || !slices.Equal(calls[0], want) && !(len(want) == 0 && len(calls[0]) == 0)):
					t.Errorf("%s %v, want one call with %v", what, calls, want)
				}
			}
			check("ResumeProcesses", api.resumed, c.wantResume)
			check("SuspendProcesses", api.suspended, c.wantSuspend)
			if want := c.wantResume != nil || c.wantSuspend != nil; wrote != want {
				t.Errorf("wrote %v, want %v", wrote, want)
			}
		})
	}
}
