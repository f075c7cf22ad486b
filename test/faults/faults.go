// Package faults is an HTTP proxy between the AWS SDK and an AWS emulator
// (moto) that makes AWS misbehave the way it does in production: on a
// configurable share of calls it answers with a throttling error, a server
// error, a connection reset (before the call reaches AWS, or after AWS has
// done it and before the answer reaches the caller) or a slow answer; and
// Rules make chosen calls fail every time (for example
// InsufficientInstanceCapacity for one instance type).
//
// Errors have the shape each AWS protocol gives them, so the SDK classifies
// them as real AWS errors are classified (throttle, retryable, code):
//
//   - EC2 (ec2query): <Response><Errors><Error><Code>…</Code><Message>…
//     </Message></Error></Errors><RequestID>…</RequestID></Response>;
//     throttling is RequestLimitExceeded, HTTP 503.
//   - Auto Scaling, IAM, STS and other query services (awsquery):
//     <ErrorResponse><Error><Type>Sender</Type><Code>…</Code><Message>…
//     </Message></Error><RequestId>…</RequestId></ErrorResponse>;
//     throttling is Throttling, HTTP 400.
//   - JSON services (awsJson1.0/1.1, e.g. SSM): {"__type":"…","message":"…"}
//     and x-amzn-ErrorType; throttling is ThrottlingException, HTTP 400.
//   - REST-JSON services (e.g. EKS): x-amzn-ErrorType header and
//     {"message":"…"}; throttling is ThrottlingException, HTTP 429.
//
// The service of a call is read from its SigV4 Authorization header (the
// credential scope), the operation from the form's Action (query
// protocols), X-Amz-Target (JSON protocols) or the method and path
// (REST-JSON: EKS's routes are known by name). Requests without a SigV4
// signature (moto's own /moto-api) pass through untouched.
//
// Point an aws.Config's BaseEndpoint at Proxy.URL:
//
//	p, _ := faults.Start(faults.Options{Target: motoURL, Rate: 0.2, Seed: 1})
//	defer p.Close()
//	cfg.BaseEndpoint = aws.String(p.URL)
//	p.AddRule(faults.InsufficientInstanceCapacity("c5.xlarge"))
//
// Beyond random faults it does what AWS does and an emulator does not:
// Options.FreshNotFound (EC2 eventual consistency for just-launched
// instance ids) and ThrottleBurst (throttling that outlasts the SDK's
// retries).
package faults

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is a kind of random fault.
type Kind string

const (
	// Throttle answers with the protocol's throttling error
	// (RequestLimitExceeded for EC2, Throttling for query services,
	// ThrottlingException for JSON services); the call is not forwarded.
	Throttle Kind = "throttle"
	// ServerError answers 500 InternalError (EC2) / InternalFailure, or 503
	// Unavailable / ServiceUnavailable; the call is not forwarded.
	ServerError Kind = "server-error"
	// Reset resets the TCP connection before the call is forwarded: AWS
	// never saw it.
	Reset Kind = "reset"
	// ResetAfter forwards the call, then resets the connection instead of
	// answering: AWS did it, the caller does not know. Retries of a
	// non-idempotent call then meet their own earlier effect
	// (AlreadyExists, a second resource).
	ResetAfter Kind = "reset-after"
	// Slow forwards the call after Options.SlowDelay.
	Slow Kind = "slow"
)

// AllKinds are the kinds of random faults, the default of Options.Kinds.
var AllKinds = []Kind{Throttle, ServerError, Reset, ResetAfter, Slow}

// Options configure a Proxy.
type Options struct {
	// Target is the URL of the emulator (http://127.0.0.1:<port>).
	Target string
	// Rate is the share of AWS calls (0 to 1) that get a random fault.
	// SetRate changes it later.
	Rate float64
	// Kinds are the random faults, chosen uniformly. Default AllKinds.
	Kinds []Kind
	// SlowDelay is how long a Slow call is held. Default 2s.
	SlowDelay time.Duration
	// Seed seeds the choice of calls and kinds. The same seed gives the
	// same sequence of decisions (calls arrive in a different order when
	// callers run concurrently, so a run is not replayed exactly).
	Seed int64
	// Eligible, when set, limits random faults to the calls it accepts
	// (Rules apply regardless).
	Eligible func(*Call) bool
	// Logf, when set, receives one line per injected fault.
	Logf func(format string, args ...any)
	// FreshNotFound, when positive, makes EC2 DescribeInstances answer
	// InvalidInstanceID.NotFound (naming them, for the whole call) for
	// instance ids the proxy first saw in a request less than FreshNotFound
	// ago: EC2's eventual consistency right after a launch (EC2 API
	// Reference, "Eventual consistency in the Amazon EC2 API").
	FreshNotFound time.Duration
	// IAMPropagation, when positive, makes an instance profile created
	// through the proxy (IAM CreateInstanceProfile) unusable for that long,
	// as IAM's eventual consistency does (IAM User Guide, "Changes that I
	// make are not always immediately visible"): Auto Scaling
	// CreateAutoScalingGroup and UpdateAutoScalingGroup whose launch
	// template (by name, as written by CreateLaunchTemplate or
	// CreateLaunchTemplateVersion through the proxy) names the profile
	// answer ValidationError "... Invalid IAM Instance Profile name".
	IAMPropagation time.Duration
	// OnCall, when set, sees every AWS call with the fault it gets ("" for
	// none, the kind, or "rule:<code>"), before the proxy acts on it: a
	// record of what the caller asked for (which instances it terminated,
	// in which order).
	OnCall func(c *Call, fault string)
}

// Call is an AWS call as the proxy sees it.
type Call struct {
	// Service is the SigV4 signing name: ec2, autoscaling, iam, sts, eks,
	// ssm, …
	Service string
	// Operation is the API operation: CreateAutoScalingGroup,
	// DescribeCluster, GetParameter, … For REST-JSON calls the proxy does
	// not know, "<METHOD> <path>".
	Operation string
	// Params are the form parameters of a query-protocol call
	// (LaunchTemplateData.InstanceType=c5.xlarge); nil for JSON calls.
	Params url.Values
	// Body is the request body.
	Body []byte

	protocol protocol
}

// ParamEquals reports whether a form parameter whose name is key, or ends
// in "."+key, has the value value (key "InstanceType" matches
// InstanceType and LaunchTemplateData.InstanceType, not InstanceTypes.1).
func (c *Call) ParamEquals(key, value string) bool {
	for k, vs := range c.Params {
		if k == key || strings.HasSuffix(k, "."+key) {
			for _, v := range vs {
				if v == value {
					return true
				}
			}
		}
	}
	return false
}

// APIError is an error answer. The proxy shapes it for the call's protocol.
type APIError struct {
	// Code is the AWS error code (RequestLimitExceeded,
	// InsufficientInstanceCapacity, ValidationError, …).
	Code string
	// Message is the error message.
	Message string
	// Status is the HTTP status (400, 429, 500, 503).
	Status int
}

// Rule makes the matching calls fail with Error: every one of them
// (Times 0), or the first Times of them.
type Rule struct {
	// Service and Operations restrict the rule; empty matches any.
	Service    string
	Operations []string
	// Match, when set, must accept the call too.
	Match func(*Call) bool
	// Error is the answer.
	Error APIError
	// Times limits the rule to its first Times matches; 0 is no limit.
	Times int
}

func (r *Rule) matches(c *Call) bool {
	if r.Service != "" && r.Service != c.Service {
		return false
	}
	if len(r.Operations) > 0 && !contains(r.Operations, c.Operation) {
		return false
	}
	return r.Match == nil || r.Match(c)
}

// InsufficientInstanceCapacity is a Rule under which the EC2 calls that
// launch instanceType themselves (RunInstances' InstanceType, CreateFleet's
// overrides) fail with EC2's InsufficientInstanceCapacity (HTTP 500, as EC2
// answers it). These are the only calls AWS fails that way: a launch
// template write never does, and an Auto Scaling group short of capacity
// reports a Failed scaling activity while every call succeeds (make the
// emulator do that with env.Environment.SetInsufficientCapacity).
func InsufficientInstanceCapacity(instanceType string) Rule {
	return Rule{
		Service: "ec2", Operations: []string{"RunInstances", "CreateFleet"},
		Match: func(c *Call) bool { return c.ParamEquals("InstanceType", instanceType) },
		Error: APIError{
			Code:   "InsufficientInstanceCapacity",
			Status: http.StatusInternalServerError,
			Message: fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested. "+
				"Our system will be working on provisioning additional capacity.", instanceType),
		},
	}
}

// Stats count what the proxy did.
type Stats struct {
	// Calls is the number of AWS calls seen (signed requests).
	Calls int
	// Injected counts random faults by kind.
	Injected map[Kind]int
	// RuleFailures counts calls failed by Rules.
	RuleFailures int
	// ByOperation counts random faults and rule failures by
	// "<service>:<operation>".
	ByOperation map[string]int
}

// Total is the number of calls that got a fault (random or rule).
func (s Stats) Total() int {
	n := s.RuleFailures
	for _, v := range s.Injected {
		n += v
	}
	return n
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	// URL is where the proxy listens (http://127.0.0.1:<port>).
	URL string

	opts   Options
	server *http.Server
	ln     net.Listener
	proxy  *httputil.ReverseProxy

	mu   sync.Mutex
	seen map[string]time.Time // instance ids, first seen (FreshNotFound)
	// profiles are the instance profiles created through the proxy, when;
	// templateProfile the profile each launch template's last version names
	// (IAMPropagation).
	profiles        map[string]time.Time
	templateProfile map[string]string
	bursts          map[string]time.Time // service -> throttled until (ThrottleBurst)
	rnd             *rand.Rand
	rate            float64
	rules           []*ruleState
	stats           Stats
	nextID          int
	stopped         bool
}

type ruleState struct {
	Rule
	id      int
	matched int
}

// Start starts a proxy on a free loopback port forwarding to opts.Target.
func Start(opts Options) (*Proxy, error) {
	target, err := url.Parse(opts.Target)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("faults: Target %q is not an absolute URL", opts.Target)
	}
	if opts.Rate < 0 || opts.Rate > 1 {
		return nil, fmt.Errorf("faults: Rate %v is not between 0 and 1", opts.Rate)
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = AllKinds
	}
	for _, k := range opts.Kinds {
		if !contains(AllKinds, k) {
			return nil, fmt.Errorf("faults: unknown kind %q (valid: %v)", k, AllKinds)
		}
	}
	if opts.SlowDelay <= 0 {
		opts.SlowDelay = 2 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:  "http://" + ln.Addr().String(),
		opts: opts, ln: ln,
		rnd:   rand.New(rand.NewSource(opts.Seed)),
		rate:  opts.Rate,
		stats: Stats{Injected: map[Kind]int{}, ByOperation: map[string]int{}},
	}
	p.proxy = httputil.NewSingleHostReverseProxy(target)
	p.proxy.Transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	p.proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// The emulator did not answer: a 502 with no AWS shape, as a load
		// balancer in front of AWS would give.
		http.Error(w, "faults proxy: "+err.Error(), http.StatusBadGateway)
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.server.Shutdown(ctx)
}

// SetRate sets the share of calls that get a random fault (0 to 1).
func (p *Proxy) SetRate(rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = min(max(rate, 0), 1)
}

// AddRule adds a rule and returns the function that removes it.
func (p *Proxy) AddRule(r Rule) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	id := p.nextID
	p.rules = append(p.rules, &ruleState{Rule: r, id: id})
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, rs := range p.rules {
			if rs.id == id {
				p.rules = append(p.rules[:i], p.rules[i+1:]...)
				return
			}
		}
	}
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Calls: p.stats.Calls, RuleFailures: p.stats.RuleFailures, Injected: map[Kind]int{}, ByOperation: map[string]int{}}
	for k, v := range p.stats.Injected {
		s.Injected[k] = v
	}
	for k, v := range p.stats.ByOperation {
		s.ByOperation[k] = v
	}
	return s
}

// String renders the stats on one line: calls, faults by kind, top
// operations.
func (s Stats) String() string {
	var kinds []string
	for _, k := range AllKinds {
		if s.Injected[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, s.Injected[k]))
		}
	}
	ops := make([]string, 0, len(s.ByOperation))
	for op := range s.ByOperation {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if s.ByOperation[ops[i]] != s.ByOperation[ops[j]] {
			return s.ByOperation[ops[i]] > s.ByOperation[ops[j]]
		}
		return ops[i] < ops[j]
	})
	if len(ops) > 8 {
		ops = ops[:8]
	}
	for i, op := range ops {
		ops[i] = fmt.Sprintf("%s=%d", op, s.ByOperation[op])
	}
	return fmt.Sprintf("calls=%d faults=%d (%s; rules=%d) top: %s", s.Calls, s.Total(),
		strings.Join(kinds, " "), s.RuleFailures, strings.Join(ops, " "))
}

// decision is what to do with one call.
type decision struct {
	kind    Kind      // random fault, or ""
	apiErr  *APIError // rule failure, or the error of kind
	variant int       // a random number for the kind's details
}

// ThrottleBurst throttles every call to service (the SigV4 signing name:
// ec2, autoscaling, iam, eks, …) for d from now, as AWS does when an
// account's request rate is exceeded during a fan-out: a burst longer than
// the SDK's retries (8 attempts, up to 20 s apart) reaches the caller.
func (p *Proxy) ThrottleBurst(service string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bursts == nil {
		p.bursts = map[string]time.Time{}
	}
	p.bursts[service] = time.Now().Add(d)
}

// notVisible returns the instance ids of a DescribeInstances call first
// seen less than FreshNotFound ago (recording the ones never seen); p.mu
// held.
func (p *Proxy) notVisible(c *Call) []string {
	if p.opts.FreshNotFound <= 0 || c.Service != "ec2" || c.Operation != "DescribeInstances" {
		return nil
	}
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	now := time.Now()
	var fresh []string
	for k, vs := range c.Params {
		if !strings.HasPrefix(k, "InstanceId.") {
			continue
		}
		for _, id := range vs {
			first, ok := p.seen[id]
			if !ok {
				first, p.seen[id] = now, now
			}
			if now.Sub(first) < p.opts.FreshNotFound {
				fresh = append(fresh, id)
			}
		}
	}
	sort.Strings(fresh)
	return fresh
}

// notPropagated records the instance profiles and launch templates
// IAMPropagation follows, and returns Auto Scaling's refusal of a group
// whose launch template names a profile created less than IAMPropagation
// ago; p.mu held.
func (p *Proxy) notPropagated(c *Call) *APIError {
	if p.opts.IAMPropagation <= 0 {
		return nil
	}
	if p.profiles == nil {
		p.profiles, p.templateProfile = map[string]time.Time{}, map[string]string{}
	}
	switch {
	case c.Service == "iam" && c.Operation == "CreateInstanceProfile":
		if name := c.Params.Get("InstanceProfileName"); name != "" {
			p.profiles[name] = time.Now()
		}
	case c.Service == "ec2" && (c.Operation == "CreateLaunchTemplate" || c.Operation == "CreateLaunchTemplateVersion"):
		name := c.Params.Get("LaunchTemplateName")
		profile := c.Params.Get("LaunchTemplateData.IamInstanceProfile.Name")
		if arn := c.Params.Get("LaunchTemplateData.IamInstanceProfile.Arn"); profile == "" && arn != "" {
			profile = arn[strings.LastIndex(arn, "/")+1:]
		}
		if name != "" && profile != "" {
			p.templateProfile[name] = profile
		}
	case c.Service == "autoscaling" && (c.Operation == "CreateAutoScalingGroup" || c.Operation == "UpdateAutoScalingGroup"):
		template := c.Params.Get("LaunchTemplate.LaunchTemplateName")
		if template == "" {
			template = c.Params.Get("MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.LaunchTemplateName")
		}
		profile := p.templateProfile[template]
		if created, ok := p.profiles[profile]; ok && time.Since(created) < p.opts.IAMPropagation {
			return &APIError{Code: "ValidationError", Status: http.StatusBadRequest, Message: fmt.Sprintf(
				"You must use a valid fully-formed launch template. Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", profile)}
		}
	}
	return nil
}

// notFoundError is EC2's answer to DescribeInstances naming ids it does not
// know (yet).
func notFoundError(ids []string) APIError {
	msg := fmt.Sprintf("The instance ID '%s' does not exist", ids[0])
	if len(ids) > 1 {
		msg = fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(ids, ", "))
	}
	return APIError{Code: "InvalidInstanceID.NotFound", Message: msg, Status: http.StatusBadRequest}
}

func (p *Proxy) decide(c *Call) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Calls++
	if e := p.notPropagated(c); e != nil {
		p.stats.RuleFailures++
		p.stats.ByOperation[c.Service+":"+c.Operation]++
		return decision{apiErr: e}
	}
	if fresh := p.notVisible(c); len(fresh) > 0 {
		p.stats.RuleFailures++
		p.stats.ByOperation[c.Service+":"+c.Operation]++
		e := notFoundError(fresh)
		return decision{apiErr: &e}
	}
	if until, ok := p.bursts[c.Service]; ok && time.Now().Before(until) {
		p.stats.Injected[Throttle]++
		p.stats.ByOperation[c.Service+":"+c.Operation]++
		return decision{kind: Throttle}
	}
	for _, r := range p.rules {
		if (r.Times == 0 || r.matched < r.Times) && r.matches(c) {
			r.matched++
			p.stats.RuleFailures++
			p.stats.ByOperation[c.Service+":"+c.Operation]++
			e := r.Error
			return decision{apiErr: &e}
		}
	}
	// The same draws for every call whatever the outcome, so the
	// sequence of decisions depends on the seed and the call count only.
	roll, pick, variant := p.rnd.Float64(), p.rnd.Intn(len(p.opts.Kinds)), p.rnd.Intn(2)
	if p.stopped || roll >= p.rate || (p.opts.Eligible != nil && !p.opts.Eligible(c)) {
		return decision{}
	}
	k := p.opts.Kinds[pick]
	p.stats.Injected[k]++
	p.stats.ByOperation[c.Service+":"+c.Operation]++
	return decision{kind: k, variant: variant}
}

// ServeHTTP classifies the call, decides its fate and acts on it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service := signingService(r.Header.Get("Authorization"))
	if service == "" {
		p.proxy.ServeHTTP(w, r) // not an AWS call (moto's /moto-api)
		return
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return // the client went away
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	c := classify(r, service, body)
	d := p.decide(c)
	if p.opts.OnCall != nil {
		fault := string(d.kind)
		if d.apiErr != nil {
			fault = "rule:" + d.apiErr.Code
		}
		p.opts.OnCall(c, fault)
	}
	logf := func(format string, args ...any) {
		if p.opts.Logf != nil {
			p.opts.Logf("faults: %s:%s: "+format, append([]any{c.Service, c.Operation}, args...)...)
		}
	}
	switch {
	case d.apiErr != nil:
		logf("rule: %s (%d)", d.apiErr.Code, d.apiErr.Status)
		writeError(w, c.protocol, *d.apiErr)
	case d.kind == Throttle:
		e := throttleError(c)
		logf("%s: %s (%d)", d.kind, e.Code, e.Status)
		writeError(w, c.protocol, e)
	case d.kind == ServerError:
		e := serverError(c, d.variant)
		logf("%s: %s (%d)", d.kind, e.Code, e.Status)
		writeError(w, c.protocol, e)
	case d.kind == Reset:
		logf("%s before forwarding", d.kind)
		resetConnection(w)
	case d.kind == ResetAfter:
		rec := &discardWriter{header: http.Header{}}
		p.proxy.ServeHTTP(rec, r)
		logf("%s: forwarded (emulator answered %d), connection reset", d.kind, rec.status)
		resetConnection(w)
	case d.kind == Slow:
		logf("%s: holding %s", d.kind, p.opts.SlowDelay)
		select {
		case <-time.After(p.opts.SlowDelay):
		case <-r.Context().Done():
			return
		}
		p.proxy.ServeHTTP(w, r)
	default:
		p.proxy.ServeHTTP(w, r)
	}
}

// resetConnection closes the client's connection with a TCP RST (linger
// 0), as a load balancer or a dying host does.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discardWriter swallows the emulator's answer of a ResetAfter call.
type discardWriter struct {
	header http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

// protocol is an AWS wire protocol.
type protocol int

const (
	protoEC2Query protocol = iota
	protoQuery
	protoJSON
	protoRESTJSON
)

var credentialScope = regexp.MustCompile(`Credential=[^/,]+/\d{8}/[^/,]+/([^/,]+)/aws4_request`)

// signingService is the service of a SigV4 Authorization header, or "".
func signingService(authorization string) string {
	m := credentialScope.FindStringSubmatch(authorization)
	if m == nil {
		return ""
	}
	return m[1]
}

func classify(r *http.Request, service string, body []byte) *Call {
	c := &Call{Service: service, Body: body}
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
		c.Params, _ = url.ParseQuery(string(body))
		c.Operation = c.Params.Get("Action")
		c.protocol = protoQuery
		if service == "ec2" {
			c.protocol = protoEC2Query
		}
	case r.Header.Get("X-Amz-Target") != "":
		target := r.Header.Get("X-Amz-Target")
		c.Operation = target[strings.LastIndex(target, ".")+1:]
		c.protocol = protoJSON
	default:
		c.protocol = protoRESTJSON
		c.Operation = restOperation(service, r.Method, r.URL.Path)
	}
	return c
}

// eksRoutes name the EKS operations by method and path.
var eksRoutes = []struct {
	method string
	path   *regexp.Regexp
	op     string
}{
	{"GET", regexp.MustCompile(`^/clusters/[^/]+$`), "DescribeCluster"},
	{"GET", regexp.MustCompile(`^/clusters$`), "ListClusters"},
	{"POST", regexp.MustCompile(`^/clusters$`), "CreateCluster"},
	{"DELETE", regexp.MustCompile(`^/clusters/[^/]+$`), "DeleteCluster"},
	{"POST", regexp.MustCompile(`^/clusters/[^/]+/access-entries$`), "CreateAccessEntry"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/access-entries$`), "ListAccessEntries"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/access-entries/.+$`), "DescribeAccessEntry"},
	{"DELETE", regexp.MustCompile(`^/clusters/[^/]+/access-entries/.+$`), "DeleteAccessEntry"},
	{"POST", regexp.MustCompile(`^/clusters/[^/]+/node-groups$`), "CreateNodegroup"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/node-groups$`), "ListNodegroups"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/node-groups/[^/]+$`), "DescribeNodegroup"},
	{"DELETE", regexp.MustCompile(`^/clusters/[^/]+/node-groups/[^/]+$`), "DeleteNodegroup"},
	{"POST", regexp.MustCompile(`^/clusters/[^/]+/node-groups/[^/]+/update-config$`), "UpdateNodegroupConfig"},
	{"POST", regexp.MustCompile(`^/clusters/[^/]+/node-groups/[^/]+/update-version$`), "UpdateNodegroupVersion"},
	{"POST", regexp.MustCompile(`^/clusters/[^/]+/fargate-profiles$`), "CreateFargateProfile"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/fargate-profiles$`), "ListFargateProfiles"},
	{"GET", regexp.MustCompile(`^/clusters/[^/]+/fargate-profiles/[^/]+$`), "DescribeFargateProfile"},
	{"DELETE", regexp.MustCompile(`^/clusters/[^/]+/fargate-profiles/[^/]+$`), "DeleteFargateProfile"},
	{"POST", regexp.MustCompile(`^/tags/.+$`), "TagResource"},
	{"DELETE", regexp.MustCompile(`^/tags/.+$`), "UntagResource"},
	{"GET", regexp.MustCompile(`^/tags/.+$`), "ListTagsForResource"},
}

func restOperation(service, method, path string) string {
	if service == "eks" {
		for _, r := range eksRoutes {
			if r.method == method && r.path.MatchString(path) {
				return r.op
			}
		}
	}
	return method + " " + path
}

// throttleError is the throttling error the call's service answers.
func throttleError(c *Call) APIError {
	switch c.protocol {
	case protoEC2Query:
		return APIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Status: http.StatusServiceUnavailable}
	case protoQuery:
		return APIError{Code: "Throttling", Message: "Rate exceeded", Status: http.StatusBadRequest}
	case protoRESTJSON:
		return APIError{Code: "ThrottlingException", Message: "Rate exceeded", Status: http.StatusTooManyRequests}
	default:
		return APIError{Code: "ThrottlingException", Message: "Rate exceeded", Status: http.StatusBadRequest}
	}
}

// serverError is a 500 or (variant 1) 503 of the call's service.
func serverError(c *Call, variant int) APIError {
	unavailable := variant == 1
	switch c.protocol {
	case protoEC2Query:
		if unavailable {
			return APIError{Code: "Unavailable", Message: "The server is overloaded and can't handle the request.", Status: http.StatusServiceUnavailable}
		}
		return APIError{Code: "InternalError", Message: "An internal error has occurred.", Status: http.StatusInternalServerError}
	case protoQuery:
		if unavailable {
			return APIError{Code: "ServiceUnavailable", Message: "Service is unable to handle request.", Status: http.StatusServiceUnavailable}
		}
		return APIError{Code: "InternalFailure", Message: "An internal error occurred.", Status: http.StatusInternalServerError}
	default:
		if unavailable {
			return APIError{Code: "ServiceUnavailableException", Message: "Service is unavailable.", Status: http.StatusServiceUnavailable}
		}
		if c.Service == "eks" {
			return APIError{Code: "ServerException", Message: "An internal error occurred.", Status: http.StatusInternalServerError}
		}
		return APIError{Code: "InternalServerError", Message: "An internal error occurred.", Status: http.StatusInternalServerError}
	}
}

// requestID is an AWS-looking request id.
func requestID() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// writeError writes e in the shape of protocol p.
func writeError(w http.ResponseWriter, p protocol, e APIError) {
	id := requestID()
	h := w.Header()
	h.Set("x-amzn-RequestId", id)
	var body []byte
	switch p {
	case protoEC2Query:
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		body = fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			xmlText(e.Code), xmlText(e.Message), id)
	case protoQuery:
		typ := "Sender"
		if e.Status >= 500 {
			typ = "Receiver"
		}
		h.Set("Content-Type", "text/xml")
		body = fmt.Appendf(nil, `<ErrorResponse xmlns="https://aws.amazon.com/"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			typ, xmlText(e.Code), xmlText(e.Message), id)
	case protoJSON:
		h.Set("Content-Type", "application/x-amz-json-1.1")
		h.Set("x-amzn-ErrorType", e.Code)
		body, _ = json.Marshal(map[string]string{"__type": e.Code, "message": e.Message})
	default:
		h.Set("Content-Type", "application/json")
		h.Set("x-amzn-ErrorType", e.Code+":http://internal.amazon.com/coral/com.amazonaws.awsfaults/")
		body, _ = json.Marshal(map[string]string{"message": e.Message})
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
