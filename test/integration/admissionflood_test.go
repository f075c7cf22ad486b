package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Finding N28 (2026-11-29 review; issue 37 item 6): one tenant's flood of
// dry-run creates must not shut InstanceGroup admission for everyone.
// Every review reaches the webhooks from the API server's address, so a
// bucket per source was one bucket all users shared: past it the webhook
// answered the API server 429, which the API server retried after the
// Retry-After (a second) until its 10 s timeout, for every user. Tenant A
// floods dry-run creates (16 at a time, no client-side rate limit) until
// the first is refused or 64 were sent (two reviews each: past any shared
// bucket of the suite, main_test.go). While A keeps flooding, tenant B,
// in another namespace, makes 5 dry-run creates and a create: each is
// admitted, no 429 comes back (not even one client-go retried), and all
// six take less than 3 s together (none waited for a Retry-After behind
// A's flood). A's refusal is a 429 naming A's user and when to retry,
// counted by instance_manager_admission_throttled_total.
func TestTenantFloodLeavesOthersAdmitted(t *testing.T) {
	requireEnv(t)
	nsA, nsB := uniqueNamespace("team-flood"), uniqueNamespace("team-calm")
	g, ctx, a := underBoundaries(t, nil, "flood-tenant", nsA)
	b := newTenant(t, "calm-tenant", nsB)
	deleteGroupsAtEnd(t, nsB)
	floodSeen, calmSeen := &tooManyRequests{}, &tooManyRequests{}
	flooder, calm := recordingClient(t, a, floodSeen), recordingClient(t, b, calmSeen)
	throttledBefore := harness.Counter(t, "instance_manager_admission_throttled_total", map[string]string{"webhook": "mutate-instancegroup", "reason": "user"})

	floodCtx, stop := context.WithCancel(ctx)
	refused := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; floodCtx.Err() == nil; i++ {
				err := flooder.Create(floodCtx, shortIG(nsA, fmt.Sprintf("flood-%d-%d", w, i)), client.DryRunAll)
				if err != nil && floodCtx.Err() == nil {
					select {
					case refused <- err:
					default:
					}
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	// Refused: a create failed, or a 429 came back (client-go then waits
	// for its Retry-After and sends again, so the create has not failed yet).
	g.Eventually(func() bool {
		select {
		case err := <-refused:
			t.Logf("a flood create failed: %v", err)
			return true
		default:
			return floodSeen.count() > 0 || floodSeen.sent() >= 64
		}
	}, 30*time.Second, 20*time.Millisecond).Should(BeTrue(), "tenant A's flood never got going")
	t.Logf("tenant A: %d creates sent, %d answered 429", floodSeen.sent(), floodSeen.count())

	start := time.Now()
	for i := 0; i < 5; i++ {
		g.Expect(calm.Create(ctx, shortIG(nsB, fmt.Sprint("dry-run-", i)), client.DryRunAll)).To(Succeed(), "tenant B's dry-run create while tenant A floods")
	}
	g.Expect(calm.Create(ctx, shortIG(nsB, "while-a-floods"))).To(Succeed(), "tenant B's create while tenant A floods")
	took := time.Since(start)
	g.Expect(calmSeen.bodies()).To(BeEmpty(), "tenant B got 429s (client-go retried them)")
	g.Expect(took).To(BeNumerically("<", 3*time.Second), "tenant B's six creates waited behind tenant A's flood")
	t.Logf("tenant B's six creates took %v", took)
	stop()
	wg.Wait()

	var first string // the webhook's refusal (the API server's own flow control answers 429 too)
	for _, body := range floodSeen.bodies() {
		if strings.Contains(body, "denied the request") {
			first = body
			break
		}
	}
	g.Expect(first).To(ContainSubstring(`denied the request: too many admission requests from user \"flood-tenant\"`))
	g.Expect(first).To(MatchRegexp(`retry in \d+s`))
	g.Expect(first).To(ContainSubstring(`"code":429`))
	g.Expect(harness.Counter(t, "instance_manager_admission_throttled_total", map[string]string{"webhook": "mutate-instancegroup", "reason": "user"})).
		To(BeNumerically(">", throttledBefore))
}

// recordingClient is tn's user without client-go's client-side rate
// limit, recording every 429 response's body in seen.
func recordingClient(t *testing.T, tn *tenant, seen *tooManyRequests) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(environment.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tn.user, Groups: []string{"system:authenticated"}}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return seen.wrap(rt) }
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tooManyRequests counts the requests sent through it and records the
// bodies of 429 responses.
type tooManyRequests struct {
	mu       sync.Mutex
	requests int
	seen     []string
}

func (r *tooManyRequests) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.requests++
		r.mu.Unlock()
		resp, err := next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		r.mu.Lock()
		r.seen = append(r.seen, strings.TrimSpace(string(body)))
		r.mu.Unlock()
		return resp, nil
	})
}

func (r *tooManyRequests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *tooManyRequests) sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *tooManyRequests) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
