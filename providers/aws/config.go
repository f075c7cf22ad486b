// Package aws gives the provisioners their AWS clients: aws-sdk-go-v2 clients
// behind narrow interfaces (Clients), one configuration path with adaptive
// retry and API-call metrics (LoadConfig, Instrument), and the shared cached
// read of the cluster's Auto Scaling groups (ScalingGroupCache).
package aws

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// Retry limits of Instrument's retryer.
const (
	// MaxAttempts is the number of attempts of one call, the first included.
	MaxAttempts = 8
	// MaxBackoff caps the (jittered, exponential) delay between attempts.
	MaxBackoff = 20 * time.Second
)

// ErrNoRegion is returned by LoadConfig when neither its argument nor the
// SDK's configuration chain names a region.
var ErrNoRegion = errors.New("no AWS region configured: pass one explicitly, or set AWS_REGION " +
	"(or region in the AWS_PROFILE's section of the shared config file)")

// LoadConfig loads the AWS configuration the SDK's default chain finds
// (environment, shared config files, web identity for IRSA, EKS Pod Identity,
// ECS and EC2 instance roles; endpoints from AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE>) and instruments it with Instrument.
//
// region, when not empty, overrides the region of the chain. Credentials are
// resolved lazily, on the first API call, so a Config is returned even where
// none are available. LoadConfig returns ErrNoRegion when no region is
// configured, and the SDK's error (wrapped) when the shared config files or
// the environment are malformed.
func LoadConfig(ctx context.Context, region string) (awssdk.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return awssdk.Config{}, ErrNoRegion
	}
	Instrument(&cfg)
	return cfg, nil
}

// Instrument sets cfg's retryer to NewRetryer and adds the API-call metrics
// middleware (see APICallsMetric) to cfg.APIOptions, so every client built
// from cfg afterwards retries throttled calls with backoff and is counted.
// Calling it again on the same Config changes nothing. It does not touch
// cfg.RetryMaxAttempts: when that is set (e.g. from AWS_MAX_ATTEMPTS) the
// SDK clients cap the attempts to it.
func Instrument(cfg *awssdk.Config) {
	cfg.Retryer = NewRetryer
	// The metrics middleware skips itself when the stack already holds it,
	// so only the growth of APIOptions is at stake here; Clip keeps the
	// append from writing into an array shared with a copied Config.
	if !slices.ContainsFunc(cfg.APIOptions, isMetricsOption) {
		cfg.APIOptions = append(slices.Clip(cfg.APIOptions), addMetricsMiddleware)
	}
}

// isMetricsOption reports whether fn is addMetricsMiddleware. Functions are
// not comparable; a top-level function's code pointer identifies it.
func isMetricsOption(fn func(*middleware.Stack) error) bool {
	return reflect.ValueOf(fn).Pointer() == reflect.ValueOf(addMetricsMiddleware).Pointer()
}

// NewRetryer returns the SDK's adaptive retry mode with MaxAttempts and
// MaxBackoff: throttling errors, 5xx and transient network errors are
// retried with exponential jittered backoff, and after throttling the
// client also slows its own request rate (client-side token bucket). The
// SDK's retry quota stays on, so a long outage fails calls fast instead of
// retrying every one of them; and it refills as calls succeed, as in the
// SDK's standard mode (see refillingRetryer).
func NewRetryer() awssdk.Retryer {
	quota := ratelimit.NewTokenRateLimit(retry.DefaultRetryRateTokens)
	return &refillingRetryer{
		AdaptiveMode: retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
				so.MaxAttempts = MaxAttempts
				so.MaxBackoff = MaxBackoff
				so.RateLimiter = quota
				// First in the chain: an answer here ends it.
				so.Retryables = append([]retry.IsErrorRetryable{noRetryCapacity}, so.Retryables...)
			})
		}),
		quota: quota,
	}
}

// refillingRetryer is the SDK's adaptive mode whose retry quota is
// refilled by every attempt that succeeds (retry.DefaultNoRetryIncrement
// tokens), as the standard mode's is. The SDK's adaptive mode
// (aws-sdk-go-v2 v1.47, https://github.com/aws/aws-sdk-go-v2/issues/3550)
// only ever takes from the quota: each retry that fails again keeps its 5
// tokens, so under a steady share of throttling or 5xx answers the 500
// tokens of a client run out after some hundred retries, and from then on
// the process never retries a call of that service again (every fault
// fails its reconcile) until it restarts. test/chaos's TestAWSFaults met
// it: with a fifth of the calls failing, the EC2 client of a manager
// running 50 groups ran dry within minutes.
type refillingRetryer struct {
	*retry.AdaptiveMode
	quota *ratelimit.TokenRateLimit
}

// GetAttemptToken is the adaptive mode's (the client-side rate limit),
// with the quota refilled when the attempt succeeds.
func (r *refillingRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	release, err := r.AdaptiveMode.GetAttemptToken(ctx)
	if err != nil {
		return nil, err
	}
	return func(opErr error) error {
		if opErr == nil {
			_ = r.quota.AddTokens(retry.DefaultNoRetryIncrement)
		}
		return release(opErr)
	}, nil
}

// capacityErrorCodes are EC2's answers that no capacity of the asked kind
// is there now. EC2 sends them with HTTP 500, so the SDK would retry them
// as server errors (MaxAttempts times, up to MaxBackoff apart), holding a
// reconcile for minutes and spending the account's call budget on an
// answer that will not change within seconds; the group's own failure
// backoff retries them instead.
var capacityErrorCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true,
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"InsufficientCapacity":                 true,
}

// noRetryCapacity answers "do not retry" for capacityErrorCodes and
// leaves every other error to the SDK's own rules.
var noRetryCapacity = retry.IsErrorRetryableFunc(func(err error) awssdk.Ternary {
	var ae smithy.APIError
	if errors.As(err, &ae) && capacityErrorCodes[ae.ErrorCode()] {
		return awssdk.FalseTernary
	}
	return awssdk.UnknownTernary
})
