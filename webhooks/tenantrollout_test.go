package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/instancemgr/instance-manager/boundaries"
)

func TestRolloutChoice(t *testing.T) {
	parse := func(rollout string) *boundaries.Config {
		data := map[string]string{"excludedNamespaces": "[team-excluded]"}
		if rollout != "" {
			data["rollout"] = rollout
		}
		c, err := boundaries.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	both := parse("tenants: {approve: true, deferUpTo: 72h}\nwaves:\n- {name: canary, namespaces: [c]}\n")
	approveOnly := parse("tenants: {approve: true}\nwaves:\n- {name: canary, namespaces: [c]}\n")
	none := parse("waves:\n- {name: canary, namespaces: [c]}\n")
	noWaves := parse("")
	const key = "instancemgr.keikoproj.io/rollout"
	approve, deferred := map[string]string{key: "approve"}, map[string]string{key: "defer"}
	for _, tc := range []struct {
		name, user, namespace string
		cfg                   *boundaries.Config
		old, annotations      map[string]string
		authorityErr          error
		want, warning         string // "" admitted / no warning; else a substring
		wantErr               bool
		wantAsked             int
	}{
		{name: "approve allowed", user: "tenant", namespace: "team-a", cfg: both, annotations: approve},
		{name: "defer allowed", user: "tenant", namespace: "team-a", cfg: both, annotations: deferred},
		{name: "defer not allowed", user: "tenant", namespace: "team-a", cfg: approveOnly, annotations: deferred, wantAsked: 1,
			want: `metadata.annotations[instancemgr.keikoproj.io/rollout]: Forbidden: "defer" is not allowed by the boundary ConfigMap's rollout.tenants (valid: approve only); ask whoever may update the boundary ConfigMap`},
		{name: "nothing allowed", user: "tenant", namespace: "team-a", cfg: none, annotations: approve, wantAsked: 1,
			want: "valid: none: the admin allows tenants no rollout choice"},
		{name: "no waves", user: "tenant", namespace: "team-a", cfg: noWaves, annotations: approve, wantAsked: 1,
			want: "the boundary ConfigMap has no rollout waves"},
		{name: "invalid value", user: "tenant", namespace: "team-a", cfg: both, annotations: map[string]string{key: "now"}, wantAsked: 1,
			want: `metadata.annotations[instancemgr.keikoproj.io/rollout]: Invalid value: "now": "now" is not a rollout choice (valid: approve, or defer for up to 72h0m0s`},
		{name: "changed to a value not allowed", user: "tenant", namespace: "team-a", cfg: approveOnly, old: approve, annotations: deferred, wantAsked: 1,
			want: `"defer" is not allowed`},
		{name: "unchanged after the policy changed", user: "tenant", namespace: "team-a", cfg: none, old: deferred, annotations: deferred},
		{name: "removed", user: "tenant", namespace: "team-a", cfg: none, old: deferred, annotations: map[string]string{}},
		{name: "the admin is never refused", user: "admin", namespace: "team-a", cfg: none, annotations: approve, wantAsked: 1,
			warning: "the rollout ignores it until the boundary ConfigMap"},
		{name: "the admin's invalid value", user: "admin", namespace: "team-a", cfg: both, annotations: map[string]string{key: "later"}, wantAsked: 1,
			warning: `"later" is not a rollout choice`},
		{name: "the controller", user: "controller", namespace: "team-a", cfg: none, annotations: approve},
		{name: "the admin's namespace", user: "tenant", namespace: testConfigMap.Namespace, cfg: none, annotations: approve},
		{name: "an excluded namespace", user: "tenant", namespace: "team-excluded", cfg: none, annotations: approve},
		{name: "authority unreachable", user: "tenant", namespace: "team-a", cfg: none, annotations: approve, authorityErr: errors.New("timeout"), wantErr: true, wantAsked: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := &fakeAuthority{admins: []string{"admin"}, err: tc.authorityErr}
			v := &InstanceGroupValidator{ConfigMap: testConfigMap, ControllerUser: "controller", Authority: auth}
			errs, warnings, err := v.rolloutChoice(context.Background(), tc.cfg, authenticationv1.UserInfo{Username: tc.user}, tc.namespace, tc.old, tc.annotations)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("got %v, want it to contain %q", got, tc.want)
			}
			if w := strings.Join(warnings, "\n"); tc.warning == "" && w != "" || !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q, want %q", w, tc.warning)
			}
			if auth.asked != tc.wantAsked {
				t.Errorf("authority asked %d times, want %d (only for a value the policy does not allow)", auth.asked, tc.wantAsked)
			}
		})
	}
	// Without an authority every tenant's value the policy does not allow is refused.
	v := &InstanceGroupValidator{ConfigMap: testConfigMap}
	if errs, _, _ := v.rolloutChoice(context.Background(), none, authenticationv1.UserInfo{Username: "admin"}, "team-a", nil, approve); len(errs) != 1 {
		t.Errorf("no authority: %v, want one refusal", errs)
	}
}
