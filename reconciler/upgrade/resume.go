package upgrade

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// ReasonRotationResumed: the resume annotation cleared a stopped rotation
// (Normal Event).
const ReasonRotationResumed = "RotationResumed"

// Resume acts on ig's v1alpha1.AnnotationResumeRotation: a rotation
// stopped at obs's latest launch template version (Stopped) forgets its
// batch record (status.rotationBatch, so the replacements that never
// joined no longer count and the Auto Scaling group launches from the
// latest version again at the next pass), with a Normal Event; then the
// annotation is removed, whether the rotation was stopped or not, so one
// annotation resumes one stop. It reports whether a stop was cleared.
// Errors come from the API server.
func (r *RollingUpdate) Resume(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation) (bool, error) {
	if _, ok := ig.Annotations[v1alpha1.AnnotationResumeRotation]; !ok {
		return false, nil
	}
	stored, err := r.storedBatch(ctx, ig)
	if err != nil {
		return false, err
	}
	resumed := stored.StoppedAt(obs.LatestTemplateVersion)
	if resumed {
		if err := r.writeBatch(ctx, ig, nil); err != nil {
			return false, err
		}
		r.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonRotationResumed, "Rotate",
			"Rotation to launch template %s version %s resumed (annotation %s): the replacements that never joined (%v) no longer count, and the Auto Scaling group launches from that version again",
			obs.LaunchTemplateName, obs.LatestTemplateVersion, v1alpha1.AnnotationResumeRotation, stored.NeverJoined)
	}
	patch := client.MergeFrom(ig.DeepCopy())
	delete(ig.Annotations, v1alpha1.AnnotationResumeRotation)
	if err := r.Client.Patch(ctx, ig, patch); err != nil {
		return resumed, fmt.Errorf("removing annotation %s: %w", v1alpha1.AnnotationResumeRotation, err)
	}
	return resumed, nil
}
