package env

import (
	"net/http"

	"github.com/go-logr/logr"
)

// loggingTransport reports every round trip to moto that fails or that moto
// answers with a server error (5xx). The SDK retries both, and a retried
// create whose first answer was lost meets AlreadyExists, so without this
// line a test sees only the second answer and never the cause.
type loggingTransport struct {
	next http.RoundTripper
	log  logr.Logger
}

func (t loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil && req.Context().Err() != nil:
		// The caller gave up (a test ending); nothing is retried.
	case err != nil:
		t.log.Info("round trip to moto failed; the SDK may retry it", "method", req.Method, "path", req.URL.Path, "error", err.Error())
	case resp.StatusCode >= 500:
		t.log.Info("moto answered a server error; the SDK may retry it", "method", req.Method, "path", req.URL.Path, "status", resp.Status)
	}
	return resp, err
}
