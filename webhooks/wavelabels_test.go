package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/instancemgr/instance-manager/boundaries"
)

type fakeAuthority struct {
	admins []string
	err    error
	asked  int
}

func (f *fakeAuthority) MayEditBoundaries(_ context.Context, u authenticationv1.UserInfo) (bool, error) {
	f.asked++
	for _, a := range f.admins {
		if a == u.Username {
			return true, f.err
		}
	}
	return false, f.err
}

func TestWaveLabels(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{
		"excludedNamespaces": "[team-excluded]",
		"rollout":            "waves:\n- {name: canary, selector: rollout=canary}\n- {name: web, namespaces: [team-web], selector: tier=web}\n- {name: all}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	canary := map[string]string{"rollout": "canary"}
	for _, tc := range []struct {
		name, user, namespace string
		old, labels           map[string]string
		authorityErr          error
		want                  string // "" admitted; else a substring of the refusal
		wantErr               bool
		wantAsked             int
	}{
		{name: "tenant creates in the canary", user: "tenant", namespace: "team-a", labels: canary,
			want: `metadata.labels[rollout]: Forbidden: adding rollout=canary is refused: rollout wave(s) canary of the boundary ConfigMap select`, wantAsked: 1},
		{name: "tenant leaves the canary", user: "tenant", namespace: "team-a", old: canary, labels: map[string]string{},
			want: "removing rollout=canary is refused", wantAsked: 1},
		{name: "tenant moves between waves", user: "tenant", namespace: "team-a", old: canary, labels: map[string]string{"rollout": "early"},
			want: "changing rollout from canary to early is refused", wantAsked: 1},
		{name: "a wave of another namespace only", user: "tenant", namespace: "team-a", labels: map[string]string{"tier": "web"}},
		{name: "the same wave, in its namespace", user: "tenant", namespace: "team-web", labels: map[string]string{"tier": "web"},
			want: "metadata.labels[tier]", wantAsked: 1},
		{name: "unchanged wave label, other labels change", user: "tenant", namespace: "team-a", old: canary, labels: map[string]string{"rollout": "canary", "team": "x"}},
		{name: "who may update the ConfigMap", user: "admin", namespace: "team-a", labels: canary, wantAsked: 1},
		{name: "the controller", user: "controller", namespace: "team-a", labels: canary},
		{name: "the admin's namespace", user: "tenant", namespace: testConfigMap.Namespace, labels: canary},
		{name: "an excluded namespace", user: "tenant", namespace: "team-excluded", labels: canary},
		{name: "authority unreachable", user: "tenant", namespace: "team-a", labels: canary, authorityErr: errors.New("timeout"), wantErr: true, wantAsked: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := &fakeAuthority{admins: []string{"admin"}, err: tc.authorityErr}
			v := &InstanceGroupValidator{ConfigMap: testConfigMap, ControllerUser: "controller", Authority: auth}
			errs, err := v.waveLabels(context.Background(), cfg, authenticationv1.UserInfo{Username: tc.user}, tc.namespace, tc.old, tc.labels)
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
			if auth.asked != tc.wantAsked {
				t.Errorf("authority asked %d times, want %d (only when a wave label changes)", auth.asked, tc.wantAsked)
			}
		})
	}
	// Without an authority every tenant's change is refused.
	v := &InstanceGroupValidator{ConfigMap: testConfigMap}
	if errs, _ := v.waveLabels(context.Background(), cfg, authenticationv1.UserInfo{Username: "admin"}, "team-a", nil, canary); len(errs) != 1 {
		t.Errorf("no authority: %v, want one refusal", errs)
	}
}
