package instancegroup

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func TestReplacementEvents(t *testing.T) {
	status := func(active string, retiring ...string) v1alpha1.InstanceGroupStatus {
		return v1alpha1.InstanceGroupStatus{ActiveScalingGroupName: active, RetiringScalingGroupNames: retiring}
	}
	cases := []struct {
		name        string
		was, now    v1alpha1.InstanceGroupStatus
		want        string // the Event's start; "" for none
		wantContent string
	}{
		{"a replacement starts", status("a"), status("b", "a"), "Normal Replacing Replacing a with b: ", "instanceType"},
		{"same step again", status("b", "a"), status("b", "a"), "", ""},
		{"changed again during it", status("b", "a"), status("c", "a", "b"), "Normal Replacing Replacing a, b with c: ", ""},
		{"the old ones are gone", status("b", "a"), status("b"), "Normal Replaced b replaced a", ""},
		{"no replacement", status("a"), status("a"), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(2)
			r := &Reconciler{Recorder: rec}
			before, ig := &v1alpha1.InstanceGroup{Status: tc.was}, &v1alpha1.InstanceGroup{Status: tc.now}
			r.replacementEvents(before, ig, &providers.Observation{Message: "replacing EKS node group a with b (instanceType [m5.large] -> [m5.xlarge])"})
			select {
			case e := <-rec.Events:
				if tc.want == "" || !strings.HasPrefix(e, tc.want) || !strings.Contains(e, tc.wantContent) {
					t.Fatalf("Event %q, want %q", e, tc.want)
				}
			default:
				if tc.want != "" {
					t.Fatalf("no Event, want %q", tc.want)
				}
			}
		})
	}
}
