package upgrade

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// listedRotator is a providers.FreshLister whose group, listed now, holds
// only now; it records terminations.
type listedRotator struct {
	now        []providers.Instance
	terminated []string
}

func (l *listedRotator) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, _ bool) error {
	l.terminated = append(l.terminated, id)
	return nil
}

func (l *listedRotator) AddCapacity(context.Context, *v1alpha1.InstanceGroup, int) (int, error) {
	return 0, nil
}

func (l *listedRotator) FreshInstances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	return l.now, nil
}

// A drained instance the cluster-autoscaler (or a spot interruption)
// already took out of the group, which the rotation's listing still
// shows, is not terminated, and no replacement is owed for it.
func TestTerminateDrainedRereadsTheGroup(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &RollingUpdate{Recorder: rec}
	in := providers.Instance{ID: "i-0gone", ProviderID: "aws:///us-west-2a/i-0gone", LifecycleState: "InService"}
	rot := &listedRotator{now: []providers.Instance{{ID: "i-0other", LifecycleState: "InService"}}}
	left, decremented, err := r.terminateDrained(context.Background(), &v1alpha1.InstanceGroup{}, &providers.Observation{Min: 1, Desired: 2}, in, true, 1, rot)
	if err != nil || left != 1 || decremented || len(rot.terminated) != 0 {
		t.Fatalf("terminateDrained = %d, %v, %v; terminated %v: want the surge kept and nothing terminated", left, decremented, err, rot.terminated)
	}
	if e := <-rec.Events; !strings.Contains(e, ReasonInstanceGone) || !strings.Contains(e, "i-0gone") {
		t.Errorf("event %q, want %s naming the instance", e, ReasonInstanceGone)
	}
}
