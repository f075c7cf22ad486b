package boundaries

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The workload criteria of failure: podNotReadyAfter and
// maxContainerRestarts, off by default.
func TestParseRolloutPodCriteria(t *testing.T) {
	for _, tc := range []struct {
		name, failure string
		notReady      time.Duration
		restarts      int
		limit         bool
		want          string // a problem; "" for none
	}{
		{name: "off by default", failure: "{}"},
		{name: "both", failure: "{podNotReadyAfter: 3m, maxContainerRestarts: 5}", notReady: 3 * time.Minute, restarts: 5, limit: true},
		{name: "no restart at all", failure: "{maxContainerRestarts: 0}", limit: true},
		{name: "not ready off", failure: "{podNotReadyAfter: 0}"},
		{name: "not ready without unit", failure: "{podNotReadyAfter: 180}", want: "data.rollout.failure.podNotReadyAfter: 180 has no unit (valid: a duration such as 30s, 10m or 1h, or 0 for none)"},
		{name: "not ready negative", failure: "{podNotReadyAfter: -1m}", want: `data.rollout.failure.podNotReadyAfter: "-1m" is out of range`},
		{name: "restarts negative", failure: "{maxContainerRestarts: -1}", want: "data.rollout.failure.maxContainerRestarts: -1 is out of range (valid: an integer from 0 to 2147483647)"},
		{name: "restarts a string", failure: "{maxContainerRestarts: many}", want: "data.rollout.failure.maxContainerRestarts: expected an integer from 0 to 2147483647, got a string"},
		{name: "misspelt", failure: "{podNotReadyFor: 3m}", want: `data.rollout.failure: unknown field "podNotReadyFor" (valid: groupError, startupTimeout, maxUnhealthyPercent, podNotReadyAfter, maxContainerRestarts)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(map[string]string{"rollout": "failure: " + tc.failure + "\nwaves:\n- {name: a}\n"})
			if tc.want != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.Contains(strings.Join(ce.Problems, "\n"), tc.want) {
					t.Fatalf("Parse = %v, want a problem containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := c.Rollout.Failure
			if f.PodNotReadyAfter != tc.notReady || f.MaxContainerRestarts != tc.restarts || f.LimitRestarts != tc.limit {
				t.Errorf("failure = %+v, want podNotReadyAfter %s, maxContainerRestarts %d (limited %v)", f, tc.notReady, tc.restarts, tc.limit)
			}
			if f.JudgesPods() != (tc.notReady > 0 || tc.limit) {
				t.Errorf("JudgesPods = %v", f.JudgesPods())
			}
		})
	}
}
