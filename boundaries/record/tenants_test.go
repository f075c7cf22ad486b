package record

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A large record keeps every group its tenants timed (the controller and
// the fan-out read them), and its readable summary shows the first
// MaxPlanned of each list, like the plan.
func TestTenantsGroupsAreKeptAndTheirSummaryBounded(t *testing.T) {
	rec := bigRecord(3000)
	until := metav1.Now()
	for i := range 200 {
		rec.Early = append(rec.Early, Group{Group: fmt.Sprintf("team-%03d/early-%04d", i, i), State: GroupHealthy})
		rec.Late = append(rec.Late, Group{Group: fmt.Sprintf("team-%03d/late-%04d", i, i), State: GroupRotating})
		rec.Deferred = append(rec.Deferred, Deferral{Group: fmt.Sprintf("team-%03d/deferred-%04d", i, i), Wave: "rest", Until: until})
	}
	data, err := Encode(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := data[KeyStatus], data[KeyStatusCompressed] != ""
	if !ok {
		t.Fatal("the record was not compacted; the test needs a large one")
	}
	for _, kind := range []string{"early", "late", "deferred"} {
		last, over := fmt.Sprintf("%s-%04d", kind, MaxPlanned-1), fmt.Sprintf("%s-%04d", kind, MaxPlanned)
		if !strings.Contains(s, last) || strings.Contains(s, over) {
			t.Errorf("summary: want %s shown and %s left out", last, over)
		}
	}
	got, _, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Early) != 200 || len(got.Late) != 200 || len(got.Deferred) != 200 || !got.IsDeferred("team-199/deferred-0199") || got.TenantMoved("team-150/late-0150") != TenantLate {
		t.Errorf("decoded: %d early, %d late, %d deferred; want every one kept", len(got.Early), len(got.Late), len(got.Deferred))
	}
}
