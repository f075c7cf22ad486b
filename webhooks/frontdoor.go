package webhooks

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Bounds of the front door's defaults.
const (
	// DefaultMaxReviewBytes bounds an AdmissionReview's body: the API
	// server takes request bodies of at most 3 MiB (--max-request-bytes)
	// and stores objects of at most 1.5 MiB (etcd), so a review of an
	// update (object and old object) stays under 3 MiB + 1.5 MiB plus its
	// envelope.
	DefaultMaxReviewBytes = 5 << 20
	// DefaultSourceRate and DefaultSourceBurst bound the requests of one
	// source address, per second, when no allowed sources are set (any
	// pod may then call the port). Never applied to the API server's
	// addresses: every user's admissions arrive from them, so a bucket
	// there is one all users share and one user's flood empties (N28);
	// AdmissionLimits bound each user instead.
	DefaultSourceRate  = 200
	DefaultSourceBurst = 400
	// maxTrackedSources bounds the per-source buckets kept.
	maxTrackedSources = 4096
)

// FrontDoor is what a request must be before a webhook handler reads it,
// checked in this order, each refusal a plain HTTP error that reads
// nothing more of the request: a source address in Sources (403), a POST
// (405) of application/json (415) with a body of at most MaxBodyBytes
// (413, by Content-Length up front and while reading), within its
// source's rate (429 with Retry-After; only without Sources). Only the API server sends
// AdmissionReviews, and the handlers trust what one says (namespace, user,
// object), so a caller the NetworkPolicy should have kept out gets
// nothing here either.
type FrontDoor struct {
	// Sources are the API server's addresses (the chart passes the
	// NetworkPolicy's networkPolicy.webhookFrom ipBlocks); empty: any
	// source.
	Sources []netip.Prefix
	// MaxBodyBytes bounds a request's body; 0: DefaultMaxReviewBytes.
	MaxBodyBytes int64
	// PerSource bounds each source address's requests; nil: unbounded.
	// NewFrontDoor sets it only when Sources is empty.
	PerSource *keyedLimiter
}

// NewFrontDoor returns a FrontDoor for the API server's CIDRs (e.g.
// "10.0.0.0/28"; empty: any source, then at most perSecond requests per
// source address with bursts of burst, perSecond <= 0: unbounded). With
// sources, no per-source bound: those are the API server's, shared by
// every user (AdmissionLimits bound each user). Errors name a CIDR that
// does not parse.
func NewFrontDoor(sources []string, perSecond float64, burst int) (*FrontDoor, error) {
	f := &FrontDoor{}
	for _, s := range sources {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("--webhook-allowed-sources %q: not a CIDR such as 10.0.0.0/28 or an address: %v", s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		f.Sources = append(f.Sources, p.Masked())
	}
	if len(f.Sources) == 0 {
		f.PerSource = newKeyedLimiter(perSecond, burst, maxTrackedSources)
	}
	return f, nil
}

// Wrap returns next behind the front door.
func (f *FrontDoor) Wrap(next http.Handler) http.Handler {
	limit := f.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxReviewBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		source, ok := sourceAddr(r.RemoteAddr)
		switch {
		case !ok || !f.fromAllowedSource(source):
			refuse(w, http.StatusForbidden, fmt.Sprintf("source %s is not the API server (--webhook-allowed-sources)", r.RemoteAddr))
		case r.Method != http.MethodPost:
			w.Header().Set("Allow", http.MethodPost)
			refuse(w, http.StatusMethodNotAllowed, "an AdmissionReview is POSTed")
		case !isJSON(r.Header.Get("Content-Type")):
			refuse(w, http.StatusUnsupportedMediaType, "an AdmissionReview is application/json")
		case r.ContentLength > limit:
			refuse(w, http.StatusRequestEntityTooLarge, "body above "+strconv.FormatInt(limit, 10)+" bytes")
		case !f.PerSource.allow(source.String()):
			throttled.WithLabelValues(webhookLabel(r.URL.Path), "source").Inc()
			w.Header().Set("Retry-After", "1")
			refuse(w, http.StatusTooManyRequests, "too many requests from "+source.String())
		default:
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		}
	})
}

func (f *FrontDoor) fromAllowedSource(a netip.Addr) bool {
	if len(f.Sources) == 0 {
		return true
	}
	for _, p := range f.Sources {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// sourceAddr is the IP address of a request's RemoteAddr ("ip:port"),
// IPv4-mapped IPv6 addresses unmapped.
func sourceAddr(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// refuse answers a request that never reaches a handler; Connection:
// close, so an unread body is not drained for a next request.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}
