package env

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// AWSCall is one request an AWSRecorder passed to moto.
type AWSCall struct {
	// Time is when the request arrived.
	Time time.Time
	// Client is the name the recorder was made for ("controller",
	// "cluster-autoscaler", ...): who made the call.
	Client string
	// Service is the signing name of the API (autoscaling, ec2, iam, eks,
	// ssm, ...), from the request's signature.
	Service string
	// Action is the operation: the Action parameter of query APIs
	// (autoscaling, ec2, iam, sts), the X-Amz-Target operation of JSON APIs
	// (ssm), else the method and path (REST APIs such as eks).
	Action string
	// Params are the query API's form parameters (empty for other
	// protocols).
	Params url.Values
	// Status is moto's HTTP status code.
	Status int
}

// AWSRecorder is a reverse proxy on 127.0.0.1 in front of moto that records
// every call made through it, so a test can tell who called what and when
// (for example who set an Auto Scaling group's desired capacity). Point one
// client at each recorder: Config for the AWS SDK, URL for anything else
// (the cluster-autoscaler's cloud-config).
type AWSRecorder struct {
	// URL is the proxy's endpoint (http://127.0.0.1:<port>).
	URL string

	client string
	srv    *http.Server
	mu     sync.Mutex
	calls  []AWSCall
}

// NewAWSRecorder starts a recording proxy to moto for the client named
// client; it stops with the environment.
func (e *Environment) NewAWSRecorder(client string) (*AWSRecorder, error) {
	if e.AWSEndpoint == "" {
		return nil, errors.New("NewAWSRecorder: the environment runs without AWS; start it with Options.AWS or Options.Bridge")
	}
	target, err := url.Parse(e.AWSEndpoint)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("NewAWSRecorder: listen: %w", err)
	}
	r := &AWSRecorder{URL: "http://" + l.Addr().String(), client: client}
	proxy := httputil.NewSingleHostReverseProxy(target)
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		call := AWSCall{Time: time.Now(), Client: client, Service: signingService(req)}
		body, _ := io.ReadAll(req.Body)
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		switch {
		case req.Header.Get("X-Amz-Target") != "":
			target := req.Header.Get("X-Amz-Target")
			call.Action = target[strings.LastIndex(target, ".")+1:]
		case strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
			call.Params, _ = url.ParseQuery(string(body))
			call.Action = call.Params.Get("Action")
		default:
			if q := req.URL.Query().Get("Action"); q != "" {
				call.Params = req.URL.Query()
				call.Action = q
			} else {
				call.Action = req.Method + " " + req.URL.Path
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(sw, req)
		call.Status = sw.status
		r.mu.Lock()
		r.calls = append(r.calls, call)
		r.mu.Unlock()
	})}
	go func() { _ = r.srv.Serve(l) }()
	e.procsMu.Lock()
	e.closers = append(e.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
	})
	e.procsMu.Unlock()
	return r, nil
}

// Config returns the environment's AWS configuration pointed at the
// recorder.
func (r *AWSRecorder) Config(base aws.Config) aws.Config {
	cfg := base.Copy()
	cfg.BaseEndpoint = aws.String(r.URL)
	return cfg
}

// Calls returns the calls recorded so far, oldest first; with actions,
// only those operations.
func (r *AWSRecorder) Calls(actions ...string) []AWSCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []AWSCall
	for _, c := range r.calls {
		if len(actions) == 0 || slices.Contains(actions, c.Action) {
			out = append(out, c)
		}
	}
	return out
}

// signingService reads the service name from a SigV4 Authorization header
// (Credential=<key>/<date>/<region>/<service>/aws4_request).
func signingService(req *http.Request) string {
	auth := req.Header.Get("Authorization")
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[3]
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
