package webhooks

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestAdmissionLimits runs sequences of reviews through one webhook's
// buckets (2 per second, bursts of 2 per user; 3 per second, bursts of 3
// per namespace), all at one instant unless a step waits.
func TestAdmissionLimits(t *testing.T) {
	limits := AdmissionLimits{UserRate: 2, UserBurst: 2, NamespaceRate: 3, NamespaceBurst: 3, ExemptUsers: []string{"system:serviceaccount:instance-manager:instance-manager"}}
	type step struct {
		user, namespace string
		groups          []string
		wait            time.Duration // before this review
		want            string        // "" admitted; else "user" or "namespace"
	}
	alice := func(want string) step { return step{user: "alice", namespace: "team-a", want: want} }
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"a user's flood is refused past its burst; another user of another namespace is not", []step{
			alice(""), alice(""), alice("user"), alice("user"),
			{user: "bob", namespace: "team-b"}, {user: "bob", namespace: "team-b"},
		}},
		{"the bucket refills at the rate", []step{
			alice(""), alice(""), alice("user"), {user: "alice", namespace: "team-a", wait: 500 * time.Millisecond},
		}},
		{"a user refused for its own rate does not spend its namespace's budget", []step{
			alice(""), alice(""), alice("user"), alice("user"), alice("user"),
			{user: "carol", namespace: "team-a"},
		}},
		{"service accounts minted in one namespace share its budget", []step{
			{user: "system:serviceaccount:team-a:sa1", namespace: "team-a"},
			{user: "system:serviceaccount:team-a:sa2", namespace: "team-a"},
			{user: "system:serviceaccount:team-a:sa3", namespace: "team-a"},
			{user: "system:serviceaccount:team-a:sa4", namespace: "team-a", want: "namespace"},
			{user: "system:serviceaccount:team-b:sa1", namespace: "team-b"},
		}},
		{"the controller is never limited, not even in a flooded namespace", []step{
			alice(""), {user: "bob", namespace: "team-a"}, {user: "carol", namespace: "team-a"}, {user: "dave", namespace: "team-a", want: "namespace"},
			{user: "system:serviceaccount:instance-manager:instance-manager", namespace: "team-a"},
			{user: "system:serviceaccount:instance-manager:instance-manager", namespace: "team-a"},
			{user: "system:serviceaccount:instance-manager:instance-manager", namespace: "team-a"},
		}},
		{"members of system:masters are never limited", []step{
			{user: "admin", namespace: "team-a", groups: []string{"system:authenticated", "system:masters"}},
			{user: "admin", namespace: "team-a", groups: []string{"system:masters"}},
			{user: "admin", namespace: "team-a", groups: []string{"system:masters"}},
			{user: "admin", namespace: "team-a", groups: []string{"system:masters"}},
		}},
		{"another group does not exempt", []step{
			{user: "ops", namespace: "team-a", groups: []string{"system:authenticated", "platform"}},
			{user: "ops", namespace: "team-b", groups: []string{"platform"}},
			{user: "ops", namespace: "team-c", groups: []string{"platform"}, want: "user"},
		}},
		{"a cluster-scoped review has only the user's bound", []step{
			{user: "alice"}, {user: "alice"}, {user: "alice", want: "user"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := limits.limiter("validate-instancegroup")
			now := time.Unix(1_700_000_000, 0)
			for i, s := range c.steps {
				now = now.Add(s.wait)
				req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: s.namespace,
					UserInfo: authenticationv1.UserInfo{Username: s.user, Groups: s.groups}}}
				got := l.refusal(req, now)
				switch {
				case s.want == "" && got != nil:
					t.Errorf("step %d (%s in %q): refused: %s", i, s.user, s.namespace, got.Result.Message)
				case s.want != "" && got == nil:
					t.Errorf("step %d (%s in %q): admitted, want refused per %s", i, s.user, s.namespace, s.want)
				case s.want != "":
					checkRefusal(t, got, s.want, s.user, s.namespace)
				}
			}
		})
	}
}

func checkRefusal(t *testing.T, got *admission.Response, reason, user, namespace string) {
	t.Helper()
	r := got.Result
	if got.Allowed || r.Code != http.StatusTooManyRequests || r.Reason != "TooManyRequests" || r.Details == nil || r.Details.RetryAfterSeconds < 1 {
		t.Errorf("refusal %+v: want not allowed, 429 TooManyRequests with RetryAfterSeconds", r)
	}
	want := []string{`user "` + user + `"`, "retry in 1s"}
	if reason == "namespace" {
		want = append(want, `namespace "`+namespace+`"`)
	}
	for _, w := range want {
		if !strings.Contains(r.Message, w) {
			t.Errorf("refusal %q does not say %q", r.Message, w)
		}
	}
}

// TestAdmissionLimitsWrap: the wrapped handler is not called for a
// refused review, the refusal is counted by webhook and reason, and zero
// rates bound nothing.
func TestAdmissionLimitsWrap(t *testing.T) {
	calls := 0
	h := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		calls++
		return admission.Allowed("")
	})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "team-a", UserInfo: authenticationv1.UserInfo{Username: "alice"}}}
	before := throttledCount(t, "mutate-instancegroup", "user")
	limited := AdmissionLimits{UserRate: 0.001, UserBurst: 1}.wrap(webhookLabel(PathMutateInstanceGroup), h)
	first, second := limited.Handle(context.Background(), req), limited.Handle(context.Background(), req)
	if !first.Allowed || second.Allowed || calls != 1 {
		t.Errorf("first allowed %v, second allowed %v, handler calls %d: want true, false, 1", first.Allowed, second.Allowed, calls)
	}
	if d := throttledCount(t, "mutate-instancegroup", "user") - before; d != 1 {
		t.Errorf("refusals counted: %v, want 1", d)
	}
	unbounded := AdmissionLimits{}.wrap("other", h)
	for i := 0; i < 100; i++ {
		if !unbounded.Handle(context.Background(), req).Allowed {
			t.Fatal("no rates set, yet a review was refused")
		}
	}
}

// TestKeyedLimiterIsBounded: past maxKeys the least recently used bucket
// is dropped (it comes back full), so memory stays bounded.
func TestKeyedLimiterIsBounded(t *testing.T) {
	l := newKeyedLimiter(0.001, 1, 2)
	now := time.Now()
	for _, k := range []string{"a", "b", "c"} {
		if ok, _ := l.take(k, now); !ok {
			t.Fatalf("%s's first event refused", k)
		}
	}
	if n := l.buckets.Len(); n != 2 {
		t.Errorf("%d buckets kept, want 2", n)
	}
	if ok, wait := l.take("c", now); ok || wait <= 0 {
		t.Errorf("c's second event: %v after %v, want refused with a wait", ok, wait)
	}
	if ok, _ := l.take("a", now); !ok {
		t.Error("a's bucket was dropped, yet it came back empty")
	}
}

func throttledCount(t *testing.T, webhook, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := throttled.WithLabelValues(webhook, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
