package eks

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// After a stopped rotation the group launches from the last good version;
// otherwise from the version matching the spec.
func TestGroupVersion(t *testing.T) {
	inst := func(id, version string, state astypes.LifecycleState) astypes.Instance {
		return astypes.Instance{InstanceId: awssdk.String(id), LifecycleState: state,
			LaunchTemplate: &astypes.LaunchTemplateSpecification{Version: awssdk.String(version)}}
	}
	stopped := &v1alpha1.RotationBatch{LaunchTemplateVersion: "7", NeverJoined: []string{"i-x", "i-y", "i-z"}}
	running := []astypes.Instance{
		inst("i-a", "5", astypes.LifecycleStateInService),
		inst("i-b", "6", astypes.LifecycleStateInService),
		inst("i-z", "7", astypes.LifecycleStateInService), // never joined
	}
	for _, tc := range []struct {
		name      string
		rec       *v1alpha1.RotationBatch
		instances []astypes.Instance
		versions  map[string]string
		want      int64
	}{
		{name: "no record", instances: running, want: 7},
		{name: "a rotation under way, not stopped", rec: &v1alpha1.RotationBatch{LaunchTemplateVersion: "7", NeverJoined: []string{"i-x"}}, instances: running, want: 7},
		{name: "stopped: the newest version a running instance has", rec: stopped, instances: running, want: 6},
		{name: "stopped at an older version: a new one is tried", rec: &v1alpha1.RotationBatch{LaunchTemplateVersion: "6", NeverJoined: []string{"i-x", "i-y", "i-z"}}, instances: running, want: 7},
		{name: "terminating instances do not count", rec: stopped,
			instances: []astypes.Instance{inst("i-a", "5", astypes.LifecycleStateInService), inst("i-b", "6", astypes.LifecycleStateTerminatingWait)}, want: 5},
		{name: "the launch version looked up wins over the instance's own", rec: stopped, instances: running, versions: map[string]string{"i-b": "4"}, want: 5},
		{name: "stopped with no older instance: the spec's version", rec: stopped, instances: []astypes.Instance{inst("i-z", "7", astypes.LifecycleStateInService)}, want: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ig := &v1alpha1.InstanceGroup{Status: v1alpha1.InstanceGroupStatus{RotationBatch: tc.rec}}
			if got := groupVersion(ig, 7, tc.instances, tc.versions); got != tc.want {
				t.Errorf("groupVersion = %d, want %d", got, tc.want)
			}
		})
	}
}
