package instancegroup

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// ReasonInstancesDrifted (Normal): the group's instances drifted; the
// message says why, per cause (the provisioner's Instance.Drift: launch
// template content, subnet, instance type, purchase options). Emitted
// when the causes change, not every pass.
const ReasonInstancesDrifted = "InstancesDrifted"

// driftShown bounds what driftSummary lists: causes, and ids per cause.
const driftShown = 3

// driftSummary says why obs's drifted instances drifted, grouped by cause
// in order of first appearance: "drift: subnet subnet-0a is no longer
// listed (2: i-1, i-2); ...", at most driftShown causes and ids each; ""
// when nothing drifted or the provisioner does not tell why.
func driftSummary(obs *providers.Observation) string {
	var causes []string
	ids := map[string][]string{}
	for _, in := range obs.Instances {
		if in.UpToDate || in.Drift == "" || strings.HasPrefix(in.LifecycleState, "Terminating") {
			continue
		}
		if _, ok := ids[in.Drift]; !ok {
			causes = append(causes, in.Drift)
		}
		ids[in.Drift] = append(ids[in.Drift], in.ID)
	}
	if len(causes) == 0 {
		return ""
	}
	parts := make([]string, 0, driftShown+1)
	for _, c := range causes[:min(len(causes), driftShown)] {
		list := ids[c]
		shown := strings.Join(list[:min(len(list), driftShown)], ", ")
		if len(list) > driftShown {
			shown += ", ..."
		}
		parts = append(parts, fmt.Sprintf("%s (%d: %s)", c, len(list), shown))
	}
	if more := len(causes) - driftShown; more > 0 {
		parts = append(parts, fmt.Sprintf("%d more cause(s)", more))
	}
	return "drift: " + strings.Join(parts, "; ")
}

// explainDrift adds why the group's instances drifted to the progress
// message (the Upgrading condition) and emits ReasonInstancesDrifted when
// that differs from what the stored condition says (a new or changed
// cause), so an Event is written once per change, never every pass.
func (r *Reconciler) explainDrift(s *scope) {
	summary := driftSummary(s.obs)
	if summary == "" || s.progress.Done {
		return
	}
	if s.progress.Message == "" {
		s.progress.Message = summary
	} else {
		s.progress.Message += "; " + summary
	}
	if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha1.ConditionUpgrading); c != nil && strings.Contains(c.Message, summary) {
		return
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(s.ig, nil, corev1.EventTypeNormal, ReasonInstancesDrifted, "Rotate", "%s", summary)
	}
}
