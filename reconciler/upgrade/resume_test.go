package upgrade

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// The resume annotation clears a stopped rotation's record once, with an
// Event, and is removed; on a rotation that is not stopped it only goes.
func TestResumeAnnotation(t *testing.T) {
	stopped := &v1alpha1.RotationBatch{LaunchTemplateVersion: "3", Owed: 1, NeverJoined: []string{"i-x", "i-y", "i-z"}}
	running := &v1alpha1.RotationBatch{LaunchTemplateVersion: "3", Owed: 1, NeverJoined: []string{"i-x"}}
	for _, tc := range []struct {
		name      string
		annotated bool
		rec       *v1alpha1.RotationBatch
		resumed   bool
		wantRec   bool
	}{
		{name: "stopped and annotated", annotated: true, rec: stopped, resumed: true, wantRec: false},
		{name: "stopped, no annotation", rec: stopped, wantRec: true},
		{name: "annotated but not stopped", annotated: true, rec: running, wantRec: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRollout(t, oneAtATime(), oldGroup(1, 3, 1))
			ctx := context.Background()
			if tc.annotated {
				r.ig.Annotations = map[string]string{v1alpha1.AnnotationResumeRotation: "true"}
				if err := r.kube.Update(ctx, r.ig); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.strat.writeBatch(ctx, r.ig, tc.rec); err != nil {
				t.Fatal(err)
			}
			obs := &providers.Observation{LaunchTemplateName: "web", LatestTemplateVersion: "3"}
			resumed, err := r.strat.Resume(ctx, r.ig, obs)
			if err != nil || resumed != tc.resumed {
				t.Fatalf("Resume = %v, %v; want %v", resumed, err, tc.resumed)
			}
			stored := &v1alpha1.InstanceGroup{}
			if err := r.kube.Get(ctx, client.ObjectKeyFromObject(r.ig), stored); err != nil {
				t.Fatal(err)
			}
			if _, ok := stored.Annotations[v1alpha1.AnnotationResumeRotation]; ok {
				t.Error("annotation left")
			}
			if (stored.Status.RotationBatch != nil) != tc.wantRec {
				t.Errorf("record %+v, want kept %v", stored.Status.RotationBatch, tc.wantRec)
			}
			if got := Stopped(stored, obs) != ""; got != (tc.rec == stopped && !tc.resumed) {
				t.Errorf("Stopped = %v after Resume", got)
			}
			sawResumed := r.sawEvent(ReasonRotationResumed)
			if sawResumed != tc.resumed {
				t.Errorf("RotationResumed Event %v, want %v", sawResumed, tc.resumed)
			}
		})
	}
}
