package aws

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	. "github.com/onsi/gomega"
)

// isolateAWSEnv clears every setting the SDK's default chain reads from the
// environment and points the shared files at nothing, so LoadConfig sees
// only what the test sets (and never a developer's real credentials).
func isolateAWSEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_DEFAULT_PROFILE":         "",
		"AWS_REGION":                  "",
		"AWS_DEFAULT_REGION":          "",
		"AWS_ACCESS_KEY_ID":           "",
		"AWS_SECRET_ACCESS_KEY":       "",
		"AWS_SESSION_TOKEN":           "",
		"AWS_ROLE_ARN":                "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_STS":        "",
		"AWS_MAX_ATTEMPTS":            "",
		"AWS_RETRY_MODE":              "",
		// Never reach for an instance metadata service from a test.
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

func TestLoadConfigRegion(t *testing.T) {
	ctx := context.Background()
	t.Run("argument wins over the environment", func(t *testing.T) {
		isolateAWSEnv(t)
		t.Setenv("AWS_REGION", "us-east-1")
		cfg, err := LoadConfig(ctx, "eu-west-1")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(cfg.Region).To(Equal("eu-west-1"))
	})
	t.Run("environment when no argument", func(t *testing.T) {
		isolateAWSEnv(t)
		t.Setenv("AWS_REGION", "us-east-2")
		cfg, err := LoadConfig(ctx, "")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(cfg.Region).To(Equal("us-east-2"))
	})
	t.Run("error naming how to set it when none", func(t *testing.T) {
		isolateAWSEnv(t)
		_, err := LoadConfig(ctx, "")
		NewWithT(t).Expect(err).To(MatchError(ErrNoRegion))
		NewWithT(t).Expect(err.Error()).To(ContainSubstring("AWS_REGION"))
	})
}

const stsIdentityXML = `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/test</Arn><UserId>AIDTEST</UserId><Account>123456789012</Account></GetCallerIdentityResult>
  <ResponseMetadata><RequestId>req-sts</RequestId></ResponseMetadata>
</GetCallerIdentityResponse>`

// LoadConfig must leave the SDK's endpoint and credential resolution alone:
// AWS_ENDPOINT_URL is how every test and the dev environment reach moto.
func TestLoadConfigHonoursEndpointEnvironmentAndInstruments(t *testing.T) {
	g := NewWithT(t)
	isolateAWSEnv(t)
	global := newScriptedServer(t, cannedResponse{status: 200, header: map[string]string{"Content-Type": "text/xml"}, body: stsIdentityXML})
	perService := newScriptedServer(t, cannedResponse{status: 200, header: map[string]string{"Content-Type": "text/xml"}, body: stsIdentityXML})
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_ENDPOINT_URL", global.URL)

	cfg, err := LoadConfig(context.Background(), "us-west-2")
	g.Expect(err).NotTo(HaveOccurred())
	d := snapshot(t, "STS", "GetCallerIdentity")
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*out.Account).To(Equal("123456789012"))
	g.Expect(global.requests()).To(Equal(1))
	calls, _ := d.since()
	g.Expect(calls[OutcomeSuccess]).To(Equal(1.0), "LoadConfig instruments the Config")

	t.Setenv("AWS_ENDPOINT_URL_STS", perService.URL)
	cfg, err = LoadConfig(context.Background(), "us-west-2")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewClients(cfg).STS.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(perService.requests()).To(Equal(1), "AWS_ENDPOINT_URL_<SERVICE> wins for its service")
	g.Expect(global.requests()).To(Equal(1))
}

func TestInstrumentIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	srv := newScriptedServer(t, cannedResponse{status: 200, header: map[string]string{"Content-Type": "text/xml"}, body: stsIdentityXML})
	cfg := testConfig(srv.URL) // instrumented once
	Instrument(&cfg)
	Instrument(&cfg)
	g.Expect(cfg.APIOptions).To(HaveLen(1))

	d := snapshot(t, "STS", "GetCallerIdentity")
	_, err := sts.NewFromConfig(cfg).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	g.Expect(err).NotTo(HaveOccurred())
	calls, attempts := d.since()
	g.Expect(calls[OutcomeSuccess]).To(Equal(1.0))
	g.Expect(attempts[OutcomeSuccess]).To(Equal(1.0))
}

// The stack-level guard: a client whose options list the middleware twice
// (e.g. Instrument applied to a Config and again through per-call options)
// still counts each call once.
func TestMetricsMiddlewareAddsItselfOnce(t *testing.T) {
	g := NewWithT(t)
	stack := middleware.NewStack("test", func() interface{} { return nil })
	g.Expect(addMetricsMiddleware(stack)).To(Succeed())
	g.Expect(addMetricsMiddleware(stack)).To(Succeed())
	g.Expect(stack.Initialize.List()).To(Equal([]string{callMetricsID}))
	g.Expect(stack.Finalize.List()).To(Equal([]string{attemptMetricsID}))
}

// Instrument must not write into an APIOptions array that a copy of the
// Config shares.
func TestInstrumentDoesNotAliasCopiedConfig(t *testing.T) {
	g := NewWithT(t)
	other := func(*middleware.Stack) error { return nil }
	base := testConfig("http://127.0.0.1:1")
	base.APIOptions = make([]func(*middleware.Stack) error, 0, 8)
	base.APIOptions = append(base.APIOptions, other)

	instrumented := base
	Instrument(&instrumented)
	sibling := base
	sibling.APIOptions = append(sibling.APIOptions, other)

	g.Expect(instrumented.APIOptions).To(HaveLen(2))
	g.Expect(isMetricsOption(instrumented.APIOptions[1])).To(BeTrue())
}

func TestNewRetryerLimits(t *testing.T) {
	g := NewWithT(t)
	r := NewRetryer()
	g.Expect(r).To(BeAssignableToTypeOf(&refillingRetryer{}))
	g.Expect(r.MaxAttempts()).To(Equal(MaxAttempts))
	throttled := &smithy.GenericAPIError{Code: "Throttling"}
	g.Expect(r.IsErrorRetryable(throttled)).To(BeTrue())
	g.Expect(r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ValidationError"})).To(BeFalse())
	for attempt := 1; attempt <= 30; attempt++ {
		delay, err := r.RetryDelay(attempt, throttled)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(delay).To(BeNumerically("<=", MaxBackoff))
	}
}

// The retry quota refills as attempts succeed (the SDK's adaptive mode
// alone never refills it): after the quota ran dry, successes make retries
// possible again, and a long run of calls of which a fifth fail once never
// exhausts it.
func TestNewRetryerRefillsItsQuota(t *testing.T) {
	g := NewWithT(t)
	r := NewRetryer().(*refillingRetryer)
	ctx := context.Background()
	failed := &smithy.GenericAPIError{Code: "InternalError"}
	// Drain: retries that fail again keep their tokens.
	for i := 0; ; i++ {
		g.Expect(i).To(BeNumerically("<", 1000), "the quota never ran out")
		release, err := r.GetRetryToken(ctx, failed)
		if err != nil {
			break
		}
		g.Expect(release(failed)).To(Succeed())
	}
	g.Expect(r.quota.Remaining()).To(BeNumerically("<", retry.DefaultRetryCost))
	// Five successful attempts pay for one retry again.
	for i := 0; i < int(retry.DefaultRetryCost); i++ {
		release, err := r.GetAttemptToken(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(release(nil)).To(Succeed())
	}
	_, err := r.GetRetryToken(ctx, failed)
	g.Expect(err).NotTo(HaveOccurred(), "a retry is possible after successes")

	// Steady state: 10,000 calls, each fifth one failing twice before it
	// succeeds; the quota never runs out.
	r = NewRetryer().(*refillingRetryer)
	for call := 0; call < 10000; call++ {
		failures := 0
		if call%5 == 0 {
			failures = 2
		}
		releaseRetry := func(error) error { return nil }
		for attempt := 0; ; attempt++ {
			releaseAttempt, err := r.GetAttemptToken(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var opErr error
			if attempt < failures {
				opErr = failed
			}
			g.Expect(releaseRetry(opErr)).To(Succeed())
			g.Expect(releaseAttempt(opErr)).To(Succeed())
			if opErr == nil {
				break
			}
			releaseRetry, err = r.GetRetryToken(ctx, opErr)
			g.Expect(err).NotTo(HaveOccurred(), "call %d: the quota ran out", call)
		}
	}
}
