package faults

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/instancemgr/instance-manager/providers"
)

// upstream is a stand-in for the emulator: it counts calls and answers
// each with an empty success of its protocol.
type upstream struct {
	*httptest.Server
	calls atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
			action := ""
			for _, kv := range strings.Split(string(body), "&") {
				if v, ok := strings.CutPrefix(kv, "Action="); ok {
					action = v
				}
			}
			w.Header().Set("Content-Type", "text/xml")
			_, _ = io.WriteString(w, "<"+action+"Response><"+action+"Result></"+action+"Result></"+action+"Response>")
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{}")
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func startProxy(t *testing.T, opts Options) *Proxy {
	t.Helper()
	p, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// config is an SDK configuration for the proxy that does not retry, so a
// test sees each answer.
func config(p *Proxy) aws.Config {
	return aws.Config{
		Region:           "us-west-2",
		Credentials:      credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint:     aws.String(p.URL),
		RetryMaxAttempts: 1,
	}
}

// calls are one call of each service instance-manager uses, by protocol.
func calls(cfg aws.Config) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"ec2": func(ctx context.Context) error {
			_, err := ec2.NewFromConfig(cfg).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
			return err
		},
		"autoscaling": func(ctx context.Context) error {
			_, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
			return err
		},
		"iam": func(ctx context.Context) error {
			_, err := iam.NewFromConfig(cfg).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("r")})
			return err
		},
		"sts": func(ctx context.Context) error {
			_, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			return err
		},
		"ssm": func(ctx context.Context) error {
			_, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/p")})
			return err
		},
		"eks": func(ctx context.Context) error {
			_, err := eks.NewFromConfig(cfg).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
			return err
		},
	}
}

func isThrottle(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

func isRetryable(err error) bool {
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

// The SDK reads each service's throttling answer as real AWS's: the
// protocol's error code, a throttle for the adaptive retryer.
func TestThrottleHasEachProtocolsShape(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, Rate: 1, Kinds: []Kind{Throttle}})
	want := map[string]string{
		"ec2": "RequestLimitExceeded", "autoscaling": "Throttling", "iam": "Throttling", "sts": "Throttling",
		"ssm": "ThrottlingException", "eks": "ThrottlingException",
	}
	for service, call := range calls(config(p)) {
		err := call(context.Background())
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: got %v, want an API error", service, err)
			continue
		}
		if apiErr.ErrorCode() != want[service] {
			t.Errorf("%s: code %q, want %q (%v)", service, apiErr.ErrorCode(), want[service], err)
		}
		if !isThrottle(err) || !isRetryable(err) {
			t.Errorf("%s: %v is not a retryable throttle for the SDK", service, err)
		}
	}
	if up.calls.Load() != 0 {
		t.Errorf("throttled calls reached the emulator %d times", up.calls.Load())
	}
	if s := p.Stats(); s.Calls != 6 || s.Injected[Throttle] != 6 {
		t.Errorf("stats %s, want 6 calls throttled", s)
	}
}

// Server errors are retryable and not throttles, in every protocol.
func TestServerErrorIsRetryable(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, Rate: 1, Kinds: []Kind{ServerError}, Seed: 3})
	codes := map[string]bool{}
	for round := 0; round < 20; round++ {
		for service, call := range calls(config(p)) {
			err := call(context.Background())
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%s: got %v, want an API error", service, err)
			}
			codes[apiErr.ErrorCode()] = true
			if !isRetryable(err) || isThrottle(err) {
				t.Errorf("%s: %v: retryable %v, throttle %v; want retryable, not a throttle", service, err, isRetryable(err), isThrottle(err))
			}
		}
	}
	for _, c := range []string{"InternalError", "Unavailable", "InternalFailure", "ServiceUnavailable", "ServerException"} {
		if !codes[c] {
			t.Errorf("no %s among the server errors seen: %v", c, codes)
		}
	}
}

// A reset before forwarding never reaches the emulator; a reset after
// does, and the caller cannot tell them apart. Both are retryable.
func TestResets(t *testing.T) {
	for _, kind := range []Kind{Reset, ResetAfter} {
		t.Run(string(kind), func(t *testing.T) {
			up := newUpstream(t)
			p := startProxy(t, Options{Target: up.URL, Rate: 1, Kinds: []Kind{kind}})
			err := calls(config(p))["autoscaling"](context.Background())
			if err == nil || !isRetryable(err) {
				t.Fatalf("got %v, want a retryable connection error", err)
			}
			want := int64(0)
			if kind == ResetAfter {
				want = 1
			}
			if up.calls.Load() != want {
				t.Errorf("the emulator saw %d calls, want %d", up.calls.Load(), want)
			}
		})
	}
}

func TestSlowCallsAreHeldThenAnswered(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, Rate: 1, Kinds: []Kind{Slow}, SlowDelay: 300 * time.Millisecond})
	start := time.Now()
	if err := calls(config(p))["iam"](context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %s, want at least 300ms", d)
	}
}

// With the SDK's own retries on, a 20% fault rate is absorbed: every call
// succeeds, and about a fifth of the attempts were faulted.
func TestSDKRetriesAbsorbFaults(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, Rate: 0.2, Seed: 7, SlowDelay: 10 * time.Millisecond})
	cfg := config(p)
	cfg.RetryMaxAttempts = 0
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts, o.MaxBackoff = 8, 10*time.Millisecond })
	}
	for i := 0; i < 50; i++ {
		for service, call := range calls(cfg) {
			if err := call(context.Background()); err != nil {
				t.Fatalf("%s call %d: %v", service, i, err)
			}
		}
	}
	s := p.Stats()
	if share := float64(s.Total()) / float64(s.Calls); share < 0.12 || share > 0.28 {
		t.Errorf("%s: faulted share %.2f, want about 0.2", s, share)
	}
	t.Log(s)
}

// A rule fails every matching call, and only those; removing it ends it.
// InsufficientInstanceCapacity fails what AWS fails that way, RunInstances
// of the type, and never a launch template write (EC2 does not check
// capacity there; an Auto Scaling group reports a Failed scaling activity).
func TestInsufficientInstanceCapacityRule(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL})
	remove := p.AddRule(InsufficientInstanceCapacity("c5.xlarge"))
	c := ec2.NewFromConfig(config(p), func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	run := func(instanceType string) error {
		_, err := c.RunInstances(context.Background(), &ec2.RunInstancesInput{
			ImageId: aws.String("ami-1"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceType(instanceType)})
		return err
	}
	for i := 0; i < 3; i++ {
		err := run("c5.xlarge")
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InsufficientInstanceCapacity" || !strings.Contains(apiErr.ErrorMessage(), "c5.xlarge") {
			t.Fatalf("got %v, want InsufficientInstanceCapacity for c5.xlarge", err)
		}
	}
	if err := run("t3.medium"); err != nil {
		t.Errorf("another instance type: %v", err)
	}
	if _, err := c.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("lt"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeC5Xlarge},
	}); err != nil {
		t.Errorf("a launch template write failed for capacity, which AWS never does: %v", err)
	}
	remove()
	if err := run("c5.xlarge"); err != nil {
		t.Errorf("after the rule was removed: %v", err)
	}
	if s := p.Stats(); s.RuleFailures != 3 || s.ByOperation["ec2:RunInstances"] != 3 {
		t.Errorf("stats %s, want 3 rule failures of ec2:RunInstances", s)
	}
}

// EC2 API Reference, "Eventual consistency in the Amazon EC2 API":
// DescribeInstances right after a launch may answer
// InvalidInstanceID.NotFound for the new id, failing the whole call.
// FreshNotFound does so for ids first asked about less than its duration
// ago, naming them.
func TestFreshNotFoundEC2EventualConsistency(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, FreshNotFound: 300 * time.Millisecond})
	c := ec2.NewFromConfig(config(p), func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	describe := func(ids ...string) error {
		_, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: ids})
		return err
	}
	err := describe("i-0aa", "i-0bb")
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidInstanceID.NotFound" || apiErr.ErrorMessage() != "The instance IDs 'i-0aa, i-0bb' do not exist" {
		t.Fatalf("fresh ids: %v, want InvalidInstanceID.NotFound naming both", err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := describe("i-0aa", "i-0cc"); !errors.As(err, &apiErr) || apiErr.ErrorMessage() != "The instance IDs 'i-0aa, i-0cc' do not exist" {
		t.Fatalf("still fresh: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := describe("i-0aa", "i-0bb"); err != nil {
		t.Errorf("ids seen long enough ago: %v", err)
	}
	if err := describe("i-0cc"); !errors.As(err, &apiErr) || apiErr.ErrorMessage() != "The instance ID 'i-0cc' does not exist" {
		t.Errorf("i-0cc, seen 150ms ago: %v", err)
	}
	if err := describe(); err != nil {
		t.Errorf("no ids: %v", err)
	}
}

// Throttling bursts outlive the SDK's retries during a fan-out (every call
// of the account throttled for a while): ThrottleBurst throttles every
// call of one service until it ends, whatever the random rate.
func TestThrottleBurstOutlivesSDKRetries(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL})
	p.ThrottleBurst("autoscaling", 400*time.Millisecond)
	cfg := config(p)
	cfg.RetryMaxAttempts = 0 // the Retryer's
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 3; o.MaxBackoff = 10 * time.Millisecond })
	}
	err := calls(cfg)["autoscaling"](context.Background())
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "Throttling" {
		t.Fatalf("during the burst: %v, want Throttling after the SDK's retries", err)
	}
	if err := calls(cfg)["ec2"](context.Background()); err != nil {
		t.Errorf("another service during the burst: %v", err)
	}
	time.Sleep(450 * time.Millisecond)
	if err := calls(cfg)["autoscaling"](context.Background()); err != nil {
		t.Errorf("after the burst: %v", err)
	}
	if s := p.Stats(); s.Injected[Throttle] != 3 {
		t.Errorf("stats %s, want 3 throttled attempts", s)
	}
}

// Times limits a rule to its first matches; Operations narrow it.
func TestRuleTimesAndOperations(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL})
	p.AddRule(Rule{Service: "autoscaling", Operations: []string{"DescribeAutoScalingGroups"}, Times: 2,
		Error: APIError{Code: "ValidationError", Message: "nope", Status: 400}})
	cfg := config(p)
	for i, wantErr := range []bool{true, true, false} {
		err := calls(cfg)["autoscaling"](context.Background())
		if (err != nil) != wantErr {
			t.Errorf("call %d: %v, want error %v", i, err, wantErr)
		}
	}
	if err := calls(cfg)["iam"](context.Background()); err != nil {
		t.Errorf("another service: %v", err)
	}
}

func TestOperationNames(t *testing.T) {
	up := newUpstream(t)
	var seen, observed []string
	p := startProxy(t, Options{Target: up.URL, Rate: 1, Eligible: func(c *Call) bool {
		seen = append(seen, c.Service+":"+c.Operation)
		return false
	}, OnCall: func(c *Call, fault string) { observed = append(observed, c.Service+":"+c.Operation+fault) }})
	for _, call := range []string{"ec2", "autoscaling", "iam", "sts", "ssm", "eks"} {
		_ = calls(config(p))[call](context.Background())
	}
	want := []string{"ec2:DescribeSubnets", "autoscaling:DescribeAutoScalingGroups", "iam:GetRole", "sts:GetCallerIdentity", "ssm:GetParameter", "eks:DescribeCluster"}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("operations %v, want %v", seen, want)
	}
	if strings.Join(observed, " ") != strings.Join(want, " ") {
		t.Errorf("OnCall saw %v, want %v (no faults)", observed, want)
	}
}

// IAM User Guide, "Changes that I make are not always immediately
// visible": an instance profile created a moment ago is not yet usable,
// and Auto Scaling refuses a group whose launch template names it
// ("Invalid IAM Instance Profile name"). IAMPropagation does so for its
// duration, for the groups whose template names such a profile only; the
// product takes the refusal as transient (providers.IsTransient).
func TestIAMPropagationInvalidInstanceProfile(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, Options{Target: up.URL, IAMPropagation: 300 * time.Millisecond})
	cfg := config(p)
	ctx := context.Background()
	if _, err := iam.NewFromConfig(cfg).CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("nodes")}); err != nil {
		t.Fatal(err)
	}
	ec2c := ec2.NewFromConfig(cfg)
	for name, profile := range map[string]string{"with-new-profile": "nodes", "with-old-profile": "older"} {
		if _, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}}}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(template string) error {
		_, err := autoscaling.NewFromConfig(cfg).CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: aws.String(template), MinSize: aws.Int32(0), MaxSize: aws.Int32(1),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(template), Version: aws.String("1")}})
		return err
	}
	err := create("with-new-profile")
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationError" || !strings.Contains(apiErr.ErrorMessage(), "Value (nodes) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name") {
		t.Fatalf("a group naming a just-created profile: %v, want ValidationError naming the profile", err)
	}
	if !providers.IsTransient(err) {
		t.Errorf("the product takes %v for terminal; IAM propagation ends by itself", err)
	}
	if err := create("with-old-profile"); err != nil {
		t.Errorf("a group naming a profile the proxy did not see created: %v", err)
	}
	time.Sleep(350 * time.Millisecond)
	if err := create("with-new-profile"); err != nil {
		t.Errorf("after IAMPropagation: %v", err)
	}
}
