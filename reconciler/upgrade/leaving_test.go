package upgrade

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// A rotation whose last drifted instance was terminated is not done while
// Auto Scaling still lists it (a termination hook holds it in
// Terminating:Wait): its node is still there, cordoned.
func TestRotationEndsWhenItsReplacedInstancesAreGone(t *testing.T) {
	g := &fakeGroup{min: 2, max: 4, desired: 2}
	g.add("i-a", 1, true)
	g.add("i-b", 1, true)
	g.add("i-old", 1, false)
	g.instances[2].LifecycleState = "Terminating:Wait"
	r := newRollout(t, &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, g)
	p := r.step()
	if p.Done || !strings.Contains(p.Message, "waiting for 1 replaced instance(s) to finish terminating: i-old") {
		t.Fatalf("step with i-old terminating = done %v, %q; want not done, waiting for i-old", p.Done, p.Message)
	}
	if p.Updated != 2 || p.Total != 2 {
		t.Errorf("progress = %d of %d, want 2 of 2 (a leaving instance is not counted)", p.Updated, p.Total)
	}
	g.instances = g.instances[:2]
	if p = r.step(); !p.Done {
		t.Fatalf("step once i-old is gone = not done, %q", p.Message)
	}
}
