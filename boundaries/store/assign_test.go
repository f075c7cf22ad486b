package store

import (
	"testing"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

func data(image string, waves bool) map[string]string {
	d := map[string]string{
		"boundaries": "restricted: [spec.eks.configuration.image]\n",
		"defaults":   "spec:\n  eks:\n    configuration:\n      image: " + image + "\n",
	}
	if waves {
		d["rollout"] = "waves:\n- {name: canary, namespaces: [canary]}\n"
	}
	return d
}

// rolling is a store with revision new current, old stable, and the
// canary wave of new started with canary/a in it.
func rolling(t *testing.T, phase string) (*Store, string, string) {
	t.Helper()
	oldData, newData := data("ami-old", true), data("ami-new", true)
	oldCfg, err := boundaries.Parse(oldData)
	if err != nil {
		t.Fatal(err)
	}
	newCfg, err := boundaries.Parse(newData)
	if err != nil {
		t.Fatal(err)
	}
	oldRev, newRev := boundaries.Revision(oldData), boundaries.Revision(newData)
	s := &Store{}
	s.SetRecord(&record.Record{Target: newRev, Stable: oldRev, Phase: phase, Wave: 0,
		Waves:      []record.Wave{{Name: "canary", Groups: []record.Group{{Group: "canary/a"}}}, {Name: "rest"}},
		RolledBack: []string{"canary/a"},
	}, map[string]*boundaries.Config{oldRev: oldCfg, newRev: newCfg})
	s.SetData(newCfg, "2", newData, newRev)
	return s, oldRev, newRev
}

func TestDesiredFollowsTheWaves(t *testing.T) {
	s, oldRev, newRev := rolling(t, record.PhaseProgressing)
	st := s.Get()
	oldHash := st.Revisions[oldRev].Hash(false)
	newHash := st.Config.Hash(false)

	if d := st.Desired("canary", "a", oldHash); d.Revision != newRev || d.Hash != newHash || d.Pending != "" || d.Wave != "canary" {
		t.Errorf("canary group: %+v, want the new revision in wave canary", d)
	}
	if d := st.Desired("team-b", "b", oldHash); d.Revision != oldRev || d.Pending != newRev || d.Reason != WaitingForWave {
		t.Errorf("later group: %+v, want old held, waiting for its wave", d)
	}
	// A group whose hash no revision gives (admitted before revisions
	// were kept) is held on the stable revision.
	if d := st.Desired("team-b", "b", "unknown"); d.Revision != oldRev {
		t.Errorf("unknown hash: %+v, want the stable revision", d)
	}
	// New groups start on the last good revision while a wave before the
	// last runs.
	if a, ok := st.ForAdmission("", "team-c"); ok || a.Revision != oldRev {
		t.Errorf("create: %+v (known %v), want the stable revision", a, ok)
	}
	// A tenant's edit keeps its group's revision.
	if a, ok := st.ForAdmission(oldHash, "team-b"); !ok || a.Revision != oldRev {
		t.Errorf("edit of a later group: %+v", a)
	}
	if a, ok := st.ForAdmission(newHash, "canary"); !ok || a.Revision != newRev {
		t.Errorf("edit of the canary: %+v", a)
	}
}

func TestDesiredWhenHaltedRolledBackOrDone(t *testing.T) {
	s, oldRev, newRev := rolling(t, record.PhaseHalted)
	st := s.Get()
	oldHash, newHash := st.Revisions[oldRev].Hash(false), st.Config.Hash(false)
	if d := st.Desired("canary", "a", newHash); d.Revision != newRev || d.Pending != "" {
		t.Errorf("halted, moved group: %+v, want it kept on the new revision", d)
	}
	if d := st.Desired("canary", "a", oldHash); d.Revision != oldRev || d.Reason != RolloutHalted {
		t.Errorf("halted, unmoved group of the wave: %+v, want it held", d)
	}

	s, _, _ = rolling(t, record.PhaseRolledBack)
	st = s.Get()
	if d := st.Desired("canary", "a", newHash); d.Revision != oldRev || d.Reason != RolledBack || d.Pending != newRev {
		t.Errorf("rolled back group: %+v, want the stable revision", d)
	}

	s, _, _ = rolling(t, record.PhaseComplete)
	st = s.Get()
	if d := st.Desired("team-b", "b", oldHash); d.Revision != newRev || d.Pending != "" {
		t.Errorf("complete: %+v", d)
	}
	if a, _ := st.ForAdmission("", "team-c"); a.Revision != newRev {
		t.Errorf("create after completion: %+v", a)
	}
}

func TestDesiredWithoutPolicyIsTheCurrentRevision(t *testing.T) {
	cfg, err := boundaries.Parse(data("ami-new", false))
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{}
	s.SetRecord(&record.Record{Target: "x", Stable: "y", Phase: record.PhaseHalted}, nil)
	s.SetData(cfg, "1", data("ami-new", false), "z")
	if d := s.Get().Desired("team-b", "b", "anything"); d.Revision != "z" || d.Pending != "" {
		t.Errorf("no policy: %+v, want the current revision", d)
	}
}
