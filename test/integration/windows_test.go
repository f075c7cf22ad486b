package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// Finding N33 (review 2026-11-29): a maintenance window whose cron
// schedule names a date no month has ("0 3 30 2 *", February 30) parsed,
// and the window then held at every instant: "changes may start at any
// time" instead of never. As admin: the ConfigMap is refused naming the
// field and why, and the one in force stays.
func TestImpossibleWindowScheduleIsRefused(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })

	data := exampleConfigMapData(t)
	data["rollout"] = "windows: [{schedule: \"0 3 30 2 *\", duration: 4h}]\n"
	g.Expect(setConfigMap(ctx, data)).To(MatchError(And(
		ContainSubstring("ConfigMap instance-manager/instance-manager is invalid"),
		ContainSubstring(`data.rollout.windows[0].schedule: "0 3 30 2 *" never activates`))))

	data["rollout"] = "windows: [{schedule: \"0 3 29 2 *\", duration: 4h}]\n"
	g.Expect(setConfigMap(ctx, data)).To(Succeed(), "a leap day is a date")
}
