package store

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/boundaries/record"
)

// A group its tenant moved early or late gets the target outside any wave;
// a deferred one keeps what it runs, also once the last wave started.
func TestDesiredFollowsTheTenantsChoices(t *testing.T) {
	s, oldRev, newRev := rolling(t, record.PhaseProgressing)
	st := s.Get()
	rec := *st.Record
	rec.Early = []record.Group{{Group: "team-b/b"}}
	rec.Late = []record.Group{{Group: "team-c/c"}}
	rec.Deferred = []record.Deferral{{Group: "team-d/d", Wave: "rest"}}
	rec.Wave = 1 // the last wave started: every other group gets the target
	rec.Waves = append([]record.Wave(nil), rec.Waves...)
	started := metav1.Now()
	rec.Waves[1].StartedAt = &started
	s.SetRecord(&rec, st.Revisions)
	st = s.Get()
	oldHash := st.Revisions[oldRev].Hash(false)

	for _, tc := range []struct {
		ns, name, rev, reason, wave string
	}{
		{"team-b", "b", newRev, "", record.TenantEarly},
		{"team-c", "c", newRev, "", record.TenantLate},
		{"team-d", "d", oldRev, DeferredByTenant, ""},
		{"team-e", "e", newRev, "", "rest"},
	} {
		d := st.Desired(tc.ns, tc.name, oldHash)
		if d.Revision != tc.rev || d.Reason != tc.reason || d.Wave != tc.wave {
			t.Errorf("%s/%s: %+v; want revision %s, reason %q, wave %q", tc.ns, tc.name, d, tc.rev, tc.reason, tc.wave)
		}
	}
}
