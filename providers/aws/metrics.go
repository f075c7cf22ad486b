package aws

import (
	"context"
	"errors"
	"slices"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Names of the metrics this package registers in controller-runtime's
// metrics.Registry (served on the manager's metrics endpoint).
const (
	// APICallsMetric counts logical AWS API calls (retries included in one
	// call) by service (the SDK's service ID: "EC2", "Auto Scaling", "IAM",
	// "EKS", "SSM", "STS"), operation (e.g. "DescribeAutoScalingGroups") and
	// outcome (OutcomeSuccess, OutcomeThrottled, OutcomeError).
	APICallsMetric = "instance_manager_aws_api_calls_total"
	// APIAttemptsMetric counts HTTP attempts (every retry is one more) by
	// service, operation and outcome.
	APIAttemptsMetric = "instance_manager_aws_api_attempts_total"
)

// Values of the outcome label.
const (
	OutcomeSuccess   = "success"
	OutcomeThrottled = "throttled"
	OutcomeError     = "error"
)

// IDs of the middlewares in the SDK's operation stack; Instrument checks
// them so that adding the middleware twice is harmless.
const (
	callMetricsID    = "instancemgr/APICallMetrics"
	attemptMetricsID = "instancemgr/APIAttemptMetrics"
	// retryMiddlewareID is the SDK's retry loop (aws/retry.Attempt).
	retryMiddlewareID = "Retry"
)

var (
	apiCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: APICallsMetric,
		Help: "AWS API calls made by instance-manager, counted once per call however many attempts it took, by service, operation and outcome (success, throttled, error).",
	}, []string{"service", "operation", "outcome"})
	apiAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: APIAttemptsMetric,
		Help: "AWS API request attempts made by instance-manager, retries included, by service, operation and outcome (success, throttled, error).",
	}, []string{"service", "operation", "outcome"})
)

func init() {
	metrics.Registry.MustRegister(apiCalls, apiAttempts)
}

// outcome classifies the result of a call or attempt. A call is throttled
// when its error carries one of the API error codes the SDK's retryer treats
// as throttling (Throttling, ThrottlingException, RequestLimitExceeded,
// TooManyRequestsException, ...), also when the retries ran out.
func outcome(err error) string {
	if err == nil {
		return OutcomeSuccess
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if _, ok := retry.DefaultThrottleErrorCodes[apiErr.ErrorCode()]; ok {
			return OutcomeThrottled
		}
	}
	return OutcomeError
}

// addMetricsMiddleware adds the call counter at the front of the Initialize
// step, outside the retry loop, and the attempt counter right inside the
// retry loop. It adds nothing that the stack already has.
func addMetricsMiddleware(stack *middleware.Stack) error {
	if _, ok := stack.Initialize.Get(callMetricsID); !ok {
		if err := stack.Initialize.Add(callMetrics{}, middleware.Before); err != nil {
			return err
		}
	}
	if _, ok := stack.Finalize.Get(attemptMetricsID); !ok {
		if _, ok := stack.Finalize.Get(retryMiddlewareID); ok {
			return stack.Finalize.Insert(attemptMetrics{}, retryMiddlewareID, middleware.After)
		}
		// A client without a retry loop: every call is one attempt.
		return stack.Finalize.Add(attemptMetrics{}, middleware.After)
	}
	return nil
}

// callMetrics counts one logical call when it returns.
type callMetrics struct{}

func (callMetrics) ID() string { return callMetricsID }

func (callMetrics) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleInitialize(ctx, in)
	count(ctx, apiCalls, err)
	return out, md, err
}

// attemptMetrics counts one attempt each time the retry loop sends.
type attemptMetrics struct{}

func (attemptMetrics) ID() string { return attemptMetricsID }

func (attemptMetrics) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleFinalize(ctx, in)
	count(ctx, apiAttempts, err)
	return out, md, err
}

func count(ctx context.Context, c *prometheus.CounterVec, err error) {
	// The SDK puts the service ID (e.g. "Auto Scaling") and operation name in
	// the context before it runs the stack.
	c.WithLabelValues(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), outcome(err)).Inc()
}

// Calls is a reading of the APICallsMetric counters by operation ("EC2
// DescribeSubnets"), all outcomes together.
type Calls map[string]float64

// CallCounts reads the APICallsMetric counters (every client this
// package instrumented in this process counts there): what the benchmarks
// and the call budget tests measure.
func CallCounts() Calls {
	out := Calls{}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		apiCalls.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		var service, operation string
		for _, l := range pb.GetLabel() {
			switch l.GetName() {
			case "service":
				service = l.GetValue()
			case "operation":
				operation = l.GetValue()
			}
		}
		out[service+" "+operation] += pb.GetCounter().GetValue()
	}
	return out
}

// Since returns the calls made after before was read: the operations whose
// count grew, by how much.
func (c Calls) Since(before Calls) Calls {
	out := Calls{}
	for op, n := range c {
		if d := n - before[op]; d > 0 {
			out[op] = d
		}
	}
	return out
}

// Total is the sum over every operation.
func (c Calls) Total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// Without returns the calls of every operation but ops.
func (c Calls) Without(ops ...string) Calls {
	out := Calls{}
	for op, n := range c {
		if !slices.Contains(ops, op) {
			out[op] = n
		}
	}
	return out
}
