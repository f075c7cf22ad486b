package record

import (
	"fmt"
	"strings"
	"testing"
)

// A rollout of 5,000 groups whose later waves carry their bounded plans
// and the most field changes fits in one ConfigMap, and its readable
// summary shows the plan and the changes.
func TestRecordWithAPlanOfThousandsOfGroupsFits(t *testing.T) {
	rec := bigRecord(5000)
	rec.Phase, rec.Wave, rec.Halt = PhaseProgressing, 0, nil
	for i := range rec.Waves[1:] {
		w := &rec.Waves[1+i]
		w.StartedAt, w.Groups = nil, nil
		for j := range MaxPlanned {
			w.Planned = append(w.Planned, fmt.Sprintf("team-%04d/planned-%04d", j, i*MaxPlanned+j))
		}
		w.PlannedCount, w.PlannedNodes = 2000, 6000
		w.Estimate = "about 5h10m0s (6000 node(s) at 1200/h, the pace of wave canary, plus soak 10m0s)"
	}
	for i := range MaxChanges {
		rec.Changes = append(rec.Changes, Change{Path: fmt.Sprintf("spec.eks.configuration.tags[example.com/key-%02d]", i),
			Old: strings.Repeat("o", MaxChangeValue), New: strings.Repeat("n", MaxChangeValue)})
	}
	rec.ChangesCount = 120
	revs := map[string]map[string]string{}
	for i := range 4 {
		revs[fmt.Sprintf("rev%07d", i)] = bigRevision(300<<10, i)
	}
	data, err := Encode(rec, revs)
	if err != nil {
		t.Fatal(err)
	}
	if n := size(data); n > MaxDataBytes {
		t.Fatalf("record data is %d bytes, above %d", n, MaxDataBytes)
	}
	s := data[KeyStatus]
	if _, ok := data[KeyStatusCompressed]; !ok || !strings.Contains(s, "planned-0099") || !strings.Contains(s, "key-29") || !strings.Contains(s, "plannedCount: 2000") {
		t.Errorf("the compacted summary (%d bytes) should show the plans and the changes:\n%.3000s", len(s), s)
	}
	got, _, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Waves[2].Planned) != MaxPlanned || len(got.Changes) != MaxChanges {
		t.Errorf("decoded plan: %d names, %d changes", len(got.Waves[2].Planned), len(got.Changes))
	}
}
