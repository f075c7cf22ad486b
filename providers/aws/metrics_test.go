package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// cannedResponse is one HTTP answer of a scriptedServer.
type cannedResponse struct {
	status int
	header map[string]string
	body   string
}

// scriptedServer answers the n-th request with the n-th canned response
// (the last one repeats) and records the requests' bodies.
type scriptedServer struct {
	*httptest.Server
	mu        sync.Mutex
	responses []cannedResponse
	bodies    []string
}

func newScriptedServer(t *testing.T, responses ...cannedResponse) *scriptedServer {
	t.Helper()
	s := &scriptedServer{responses: responses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, string(body))
		resp := s.responses[min(n, len(s.responses)-1)]
		s.mu.Unlock()
		for k, v := range resp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.status)
		_, _ = io.WriteString(w, resp.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// testConfig is an instrumented Config for endpoint with dummy credentials.
func testConfig(endpoint string) awssdk.Config {
	cfg := awssdk.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: awssdk.String(endpoint),
	}
	Instrument(&cfg)
	return cfg
}

// Canned Auto Scaling (awsQuery protocol, XML) answers.
var (
	asgOK = cannedResponse{status: 200, header: map[string]string{"Content-Type": "text/xml"}, body: `<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">
  <DescribeAutoScalingGroupsResult><AutoScalingGroups><member>
    <AutoScalingGroupName>ig-a</AutoScalingGroupName><MinSize>1</MinSize><MaxSize>3</MaxSize><DesiredCapacity>2</DesiredCapacity>
  </member></AutoScalingGroups></DescribeAutoScalingGroupsResult>
  <ResponseMetadata><RequestId>req-ok</RequestId></ResponseMetadata>
</DescribeAutoScalingGroupsResponse>`}
	asgThrottled = asgError("Throttling", "Rate exceeded")
	asgInvalid   = asgError("ValidationError", "1 validation error detected")
)

func asgError(code, message string) cannedResponse {
	return cannedResponse{status: 400, header: map[string]string{"Content-Type": "text/xml"}, body: fmt.Sprintf(`<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">
  <Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>
  <RequestId>req-err</RequestId>
</ErrorResponse>`, code, message)}
}

// counter reads one series of a counter from controller-runtime's registry,
// which is what the manager serves; 0 when the series does not exist yet.
func counter(t *testing.T, name, service, operation, outcome string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	want := map[string]string{"service": service, "operation": operation, "outcome": outcome}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsEqual(m.GetLabel(), want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelsEqual(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// delta snapshots the calls and attempts counters of one operation and
// returns the increase of each outcome since the snapshot.
type delta struct {
	t                  *testing.T
	service, operation string
	calls, attempts    map[string]float64
}

var outcomes = []string{OutcomeSuccess, OutcomeThrottled, OutcomeError}

func snapshot(t *testing.T, service, operation string) *delta {
	d := &delta{t: t, service: service, operation: operation, calls: map[string]float64{}, attempts: map[string]float64{}}
	for _, o := range outcomes {
		d.calls[o] = counter(t, APICallsMetric, service, operation, o)
		d.attempts[o] = counter(t, APIAttemptsMetric, service, operation, o)
	}
	return d
}

func (d *delta) since() (calls, attempts map[string]float64) {
	calls, attempts = map[string]float64{}, map[string]float64{}
	for _, o := range outcomes {
		calls[o] = counter(d.t, APICallsMetric, d.service, d.operation, o) - d.calls[o]
		attempts[o] = counter(d.t, APIAttemptsMetric, d.service, d.operation, o) - d.attempts[o]
	}
	return calls, attempts
}

func TestMetricsCountThrottledRetryAsOneSuccessfulCall(t *testing.T) {
	g := NewWithT(t)
	srv := newScriptedServer(t, asgThrottled, asgOK)
	client := autoscaling.NewFromConfig(testConfig(srv.URL))
	d := snapshot(t, "Auto Scaling", "DescribeAutoScalingGroups")

	out, err := client.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(HaveLen(1))
	g.Expect(srv.requests()).To(Equal(2), "the throttled attempt is retried")
	calls, attempts := d.since()
	g.Expect(calls).To(Equal(map[string]float64{OutcomeSuccess: 1, OutcomeThrottled: 0, OutcomeError: 0}))
	g.Expect(attempts).To(Equal(map[string]float64{OutcomeSuccess: 1, OutcomeThrottled: 1, OutcomeError: 0}))
}

func TestMetricsCountValidationErrorOnceWithoutRetry(t *testing.T) {
	g := NewWithT(t)
	srv := newScriptedServer(t, asgInvalid)
	client := autoscaling.NewFromConfig(testConfig(srv.URL))
	d := snapshot(t, "Auto Scaling", "DescribeAutoScalingGroups")

	_, err := client.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})

	var apiErr smithy.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "got %v", err)
	g.Expect(apiErr.ErrorCode()).To(Equal("ValidationError"))
	g.Expect(srv.requests()).To(Equal(1))
	calls, attempts := d.since()
	g.Expect(calls).To(Equal(map[string]float64{OutcomeSuccess: 0, OutcomeThrottled: 0, OutcomeError: 1}))
	g.Expect(attempts).To(Equal(map[string]float64{OutcomeSuccess: 0, OutcomeThrottled: 0, OutcomeError: 1}))
}

func TestMetricsCountCallThrottledWhenRetriesRunOut(t *testing.T) {
	g := NewWithT(t)
	srv := newScriptedServer(t, asgThrottled)
	cfg := testConfig(srv.URL)
	cfg.RetryMaxAttempts = 2 // keeps the backoff of the test short
	client := autoscaling.NewFromConfig(cfg)
	d := snapshot(t, "Auto Scaling", "DescribeAutoScalingGroups")

	_, err := client.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})

	var maxErr *retry.MaxAttemptsError
	g.Expect(errors.As(err, &maxErr)).To(BeTrue(), "got %v", err)
	g.Expect(srv.requests()).To(Equal(2))
	calls, attempts := d.since()
	g.Expect(calls).To(Equal(map[string]float64{OutcomeSuccess: 0, OutcomeThrottled: 1, OutcomeError: 0}))
	g.Expect(attempts).To(Equal(map[string]float64{OutcomeSuccess: 0, OutcomeThrottled: 2, OutcomeError: 0}))
}

// The JSON protocols carry the error code elsewhere (__type); the
// classification must not depend on the protocol.
func TestMetricsClassifyJSONProtocolThrottling(t *testing.T) {
	g := NewWithT(t)
	jsonHeader := map[string]string{"Content-Type": "application/x-amz-json-1.1"}
	srv := newScriptedServer(t,
		cannedResponse{status: 400, header: jsonHeader, body: `{"__type":"ThrottlingException","message":"Rate exceeded"}`},
		cannedResponse{status: 200, header: jsonHeader, body: `{"Parameter":{"Name":"/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id","Value":"ami-0123"}}`},
	)
	client := ssm.NewFromConfig(testConfig(srv.URL))
	d := snapshot(t, "SSM", "GetParameter")

	out, err := client.GetParameter(context.Background(), &ssm.GetParameterInput{Name: awssdk.String("/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*out.Parameter.Value).To(Equal("ami-0123"))
	calls, attempts := d.since()
	g.Expect(calls[OutcomeSuccess]).To(Equal(1.0))
	g.Expect(attempts[OutcomeThrottled]).To(Equal(1.0))
	g.Expect(attempts[OutcomeSuccess]).To(Equal(1.0))
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, OutcomeSuccess},
		{&smithy.GenericAPIError{Code: "Throttling"}, OutcomeThrottled},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, OutcomeThrottled},
		{&smithy.GenericAPIError{Code: "RequestLimitExceeded"}, OutcomeThrottled},
		{&smithy.GenericAPIError{Code: "TooManyRequestsException"}, OutcomeThrottled},
		{&retry.MaxAttemptsError{Attempt: 8, Err: &smithy.GenericAPIError{Code: "RequestLimitExceeded"}}, OutcomeThrottled},
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "Throttling"}), OutcomeThrottled},
		{&smithy.GenericAPIError{Code: "ValidationError"}, OutcomeError},
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException"}, OutcomeError},
		{context.DeadlineExceeded, OutcomeError},
	} {
		if got := outcome(tc.err); got != tc.want {
			t.Errorf("outcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
