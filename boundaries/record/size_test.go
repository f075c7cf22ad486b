package record

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// bigRecord is a halted rollout of groups groups over three waves, as the
// controller writes it.
func bigRecord(groups int) *Record {
	at := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(97 * time.Second))
	rec := &Record{Target: "5d41402abc", Stable: "7d793037a0", Phase: PhaseHalted, Wave: 2, StartedAt: &at,
		Message: "Halted revision 5d41402abc (last good 7d793037a0), wave 3/3 rest: 4990 group(s) done, 10 failed, 0 waiting"}
	for i, name := range []string{"canary", "early", "rest"} {
		rec.Waves = append(rec.Waves, Wave{Name: name, Selects: "percent 25", Soak: metav1.Duration{Duration: 10 * time.Minute}, StartedAt: &at})
		_ = i
	}
	var failed, reasons []string
	for i := range groups {
		g := Group{Group: fmt.Sprintf("team-%04d/workers-%04d", i/3, i), State: GroupHealthy, MovedAt: &at, Since: &later, Updated: 2 + i%7, Generation: int64(3 + i%5)}
		if i%500 == 0 {
			g.State, g.Criterion = GroupFailed, CriterionStartupTimeout
			g.Reason = "not Ready with every instance updated and every in-service instance a Ready node within the startup timeout 10m0s (state Upgrading: 1 of 3 updated)"
			failed = append(failed, g.Group)
			reasons = append(reasons, g.Group+": "+g.Reason)
		}
		w := &rec.Waves[min(i*3/groups, 2)]
		w.Groups = append(w.Groups, g)
	}
	rec.Halt = &Halt{At: later, Wave: "rest", Reason: strings.Join(reasons, "; "), Criterion: CriterionStartupTimeout, Groups: failed}
	return rec
}

// bigRevision is a boundary ConfigMap's data of about size bytes: quotas
// and allowlists per namespace, as a large installation writes them.
func bigRevision(size, seed int) map[string]string {
	var b strings.Builder
	b.WriteString("perNamespace: {maxGroups: 100}\nnamespaces:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  team-%04d: {maxGroups: %d, maxInstances: %d, allowedInstanceTypes: [m5.large, m5.xlarge, c5.2xlarge, r5.large], owner: team-%04d@example.com}\n",
			i, 10+(i+seed)%40, 100+(i*7+seed)%900, i)
	}
	return map[string]string{"quotas": b.String(), "defaults": fmt.Sprintf("spec:\n  eks:\n    configuration:\n      image: ami-%08d\n", seed)}
}

// A rollout of 5,000 groups keeping four large revisions fits in one
// ConfigMap, as the format before it did not, and reads back whole.
func TestRecordOfThousandsOfGroupsFitsAConfigMap(t *testing.T) {
	rec := bigRecord(5000)
	revs := map[string]map[string]string{}
	for i := range 4 {
		revs[fmt.Sprintf("rev%07d", i)] = bigRevision(300<<10, i)
	}
	before := len(mustYAML(t, rec))
	for _, d := range revs {
		before += len(mustJSON(t, d))
	}
	if before <= MaxDataBytes {
		t.Fatalf("the fixture is %d bytes in the format before: too small to test the bound", before)
	}
	data, err := Encode(rec, revs)
	if err != nil {
		t.Fatal(err)
	}
	n := size(data)
	t.Logf("FIGURE record_bytes=%d for 5000 groups and 4 revisions of 300 KiB (format before: %d bytes, limit %d)", n, before, MaxDataBytes)
	if n > MaxDataBytes {
		t.Fatalf("record data is %d bytes, above %d", n, MaxDataBytes)
	}
	if _, ok := data[KeyStatusCompressed]; !ok {
		t.Fatal("a record of 5,000 groups is not compacted")
	}
	if s := data[KeyStatus]; !strings.Contains(s, "phase: Halted") || strings.Contains(s, "workers-0001") || len(s) > 16<<10 {
		t.Errorf("the summary (%d bytes) should show the phase and no group:\n%.2000s", len(s), s)
	}
	got, gotRevs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// (metav1.Time reads back in the local zone: compare as written.)
	if string(mustYAML(t, got)) != string(mustYAML(t, rec)) {
		t.Error("the compacted record does not read back as written")
	}
	if !reflect.DeepEqual(gotRevs, revs) {
		t.Error("the compressed revisions do not read back as written")
	}
	if got.WaveOf("team-1666/workers-4999") != 2 {
		t.Error("a group of the compressed waves is not found")
	}
}

// A record that cannot fit (revisions of data that does not compress) is
// a *TooLargeError naming the sizes, not data the API server refuses.
func TestRecordTooLargeIsAnError(t *testing.T) {
	revs := map[string]map[string]string{}
	for i := range 3 {
		raw := make([]byte, 400<<10)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		revs[fmt.Sprint("r", i)] = map[string]string{"blob": base64.StdEncoding.EncodeToString(raw)}
	}
	_, err := Encode(bigRecord(100), revs)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Revisions != 3 || tooLarge.Groups != 100 || tooLarge.Bytes <= MaxDataBytes {
		t.Fatalf("Encode of 1.6 MB of random revisions: %v, want a TooLargeError", err)
	}
	if !strings.Contains(err.Error(), "above the") {
		t.Errorf("message %q", err)
	}
}

// The format before (written by an earlier controller version: the whole
// record as YAML under status, each revision as JSON) still reads, so an
// upgraded controller carries on with the rollout it finds.
func TestRecordOfTheFormatBeforeStillReads(t *testing.T) {
	old := map[string]string{
		"status": `completedAt: null
groupsDone: 1
groupsFailed: 1
groupsWaiting: 2
halt:
  at: "2026-11-20T10:00:00Z"
  criterion: startup_timeout
  groups:
  - canary/a
  reason: 'canary/a: not Ready'
  wave: canary
message: Halted revision b (last good a)
phase: Halted
stable: a
startedAt: "2026-11-20T09:50:00Z"
target: b
wave: 0
waves:
- groups:
  - criterion: startup_timeout
    generation: 4
    group: canary/a
    movedAt: "2026-11-20T09:51:00Z"
    reason: not Ready
    since: "2026-11-20T09:51:00Z"
    state: Failed
    updated: 1
  name: canary
  selects: namespaces [canary]
  soak: 5m0s
  startedAt: "2026-11-20T09:50:00Z"
- name: rest
  selects: the rest
  soak: 5m0s
`,
		"revision.a": `{"defaults":"spec:\n  eks: {}\n","rollout":"waves: []\n"}`,
		"revision.b": `{"defaults":"spec:\n  eks:\n    configuration: {image: ami-2}\n"}`,
	}
	rec, revs, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != PhaseHalted || rec.Halt.Groups[0] != "canary/a" || rec.Waves[0].Groups[0].Generation != 4 || rec.WaveOf("canary/a") != 0 {
		t.Errorf("record %+v", rec)
	}
	if revs["a"]["rollout"] != "waves: []\n" || !strings.Contains(revs["b"]["defaults"], "ami-2") {
		t.Errorf("revisions %v", revs)
	}
	// Written again, a small record keeps the same readable form.
	again, err := Encode(rec, revs)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again[KeyStatusCompressed]; ok || again["revision.b"] != old["revision.b"] || !strings.Contains(again[KeyStatus], "group: canary/a") {
		t.Errorf("a small record was compacted: %v", again)
	}
}

// A compressed value that is damaged is reported; the rest is kept.
func TestDamagedCompressedRevisionIsReported(t *testing.T) {
	data, err := Encode(bigRecord(3), map[string]map[string]string{"a": bigRevision(20<<10, 1), "b": {"x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if !compressed(data["revision.a"]) {
		t.Fatalf("a 20 KiB revision is not compressed: %.80s", data["revision.a"])
	}
	data["revision.a"] = gzipPrefix + "AAAA"
	_, revs, err := Decode(data)
	if err == nil || !strings.Contains(err.Error(), "data.revision.a") || len(revs) != 1 || revs["b"]["x"] != "y" {
		t.Errorf("Decode with a damaged revision: %v, %v", err, revs)
	}
}

func mustYAML(t *testing.T, r *Record) []byte {
	t.Helper()
	raw, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
