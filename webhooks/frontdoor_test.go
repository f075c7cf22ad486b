package webhooks

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestFrontDoor(t *testing.T) {
	door, err := NewFrontDoor([]string{"10.0.0.0/28", "192.168.1.7"}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	door.MaxBodyBytes = 64
	review := `{"kind":"AdmissionReview"}`
	for _, c := range []struct {
		name, remote, method, contentType, body string
		want                                    int
	}{
		{"the API server", "10.0.0.5:4431", http.MethodPost, "application/json", review, http.StatusOK},
		{"an address given alone", "192.168.1.7:4431", http.MethodPost, "application/json", review, http.StatusOK},
		{"IPv4-mapped IPv6", "[::ffff:10.0.0.6]:4431", http.MethodPost, "application/json", review, http.StatusOK},
		{"a pod", "10.0.1.9:4431", http.MethodPost, "application/json", review, http.StatusForbidden},
		{"not an address", "pod:4431", http.MethodPost, "application/json", review, http.StatusForbidden},
		{"GET", "10.0.0.5:4431", http.MethodGet, "", "", http.StatusMethodNotAllowed},
		{"not JSON", "10.0.0.5:4431", http.MethodPost, "text/plain", review, http.StatusUnsupportedMediaType},
		{"too large", "10.0.0.5:4431", http.MethodPost, "application/json", strings.Repeat("x", 65), http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			reached := false
			h := door.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				_, _ = io.ReadAll(r.Body)
			}))
			r := httptest.NewRequest(c.method, "/validate-instancegroup", strings.NewReader(c.body))
			r.RemoteAddr = c.remote
			r.Header.Set("Content-Type", c.contentType)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want || reached != (c.want == http.StatusOK) {
				t.Errorf("status %d (handler reached: %v), want %d", w.Code, reached, c.want)
			}
		})
	}
	t.Run("per-source rate", func(t *testing.T) {
		// Only without allowed sources: the API server's addresses carry
		// every user's admissions (N28).
		if door.PerSource != nil {
			t.Fatal("a per-source bound on the API server's addresses")
		}
		open, err := NewFrontDoor(nil, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		h := open.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		codes := map[string][]int{}
		for i := 0; i < 4; i++ {
			for _, src := range []string{"10.0.0.1:1", "10.0.0.2:1"} {
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
				r.RemoteAddr = src
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				codes[src] = append(codes[src], w.Code)
			}
		}
		// Burst 2 at 1 per second: two pass, the next are refused; the
		// other source has its own bucket.
		for src, got := range codes {
			if got[0] != 200 || got[1] != 200 || got[2] != http.StatusTooManyRequests || got[3] != http.StatusTooManyRequests {
				t.Errorf("%s: %v, want 200 200 429 429", src, got)
			}
		}
	})
	if _, err := NewFrontDoor([]string{"10.0.0.0/33"}, 0, 0); err == nil || !strings.Contains(err.Error(), "--webhook-allowed-sources") {
		t.Errorf("a bad CIDR: %v, want an error naming the flag", err)
	}
	if d, _ := NewFrontDoor(nil, 0, 0); !d.fromAllowedSource(mustAddr(t, "203.0.113.9")) {
		t.Error("no sources given: any source should pass")
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
