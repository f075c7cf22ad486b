package record

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEncodeDecode(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	rec := &Record{Target: "b", Stable: "a", Phase: PhaseHalted, Wave: 0,
		Waves: []Wave{{Name: "canary", Selects: "namespaces [c]", Soak: metav1.Duration{Duration: time.Minute}, StartedAt: &at,
			Groups: []Group{{Group: "c/x", State: GroupFailed, Criterion: CriterionStartupTimeout, MovedAt: &at, Since: &at}}}, {Name: "rest", Selects: "the rest"}},
		Halt: &Halt{At: at, Wave: "canary", Reason: "c/x: timeout", Criterion: CriterionStartupTimeout, Groups: []string{"c/x"}}}
	revs := map[string]map[string]string{"a": {"defaults": "spec: {}\n"}, "b": {"boundaries": "restricted: []\n"}}
	data, err := Encode(rec, revs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(data[KeyStatus], "phase: Halted") || data[KeyRevisionPrefix+"a"] != `{"defaults":"spec: {}\n"}` {
		t.Errorf("data = %v", data)
	}
	got, gotRevs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Encode(got, gotRevs)
	if err != nil || !reflect.DeepEqual(again, data) || got.Halt.Groups[0] != "c/x" || got.Waves[0].Groups[0].MovedAt.Time.Unix() != at.Unix() {
		t.Errorf("round trip:\n%v\nwant\n%v", again, data)
	}
	if got.WaveOf("c/x") != 0 || got.WaveOf("d/y") != -1 || got.LastWaveStarted() {
		t.Error("wave membership")
	}

	// A revision that does not decode is reported; the rest is kept.
	data[KeyRevisionPrefix+"z"] = "{"
	_, gotRevs, err = Decode(data)
	if err == nil || !strings.Contains(err.Error(), "data.revision.z") || len(gotRevs) != 2 {
		t.Errorf("Decode with a bad revision: %v, %d revisions", err, len(gotRevs))
	}
}
