package webhooks

import (
	"context"
	"fmt"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Defaults of the AWS budget of one requester at admission.
const (
	// DefaultRequesterAWSRate and DefaultRequesterAWSBurst: AWS reads per
	// second (and burst) that one requester's admissions may cause on one
	// replica. Answers are cached (refcheck: a minute per distinct
	// reference), so a requester naming the same subnets, roles and images
	// spends nothing after the first; one naming new ones in a loop (to
	// throttle IAM and EC2 for the account, or to enumerate names) is held
	// to this rate.
	DefaultRequesterAWSRate  = 5
	DefaultRequesterAWSBurst = 50
	maxTrackedRequesters     = 4096
)

type requesterKey struct{}

// withRequester wraps h so that the AWS calls made while it handles a
// request are charged to the request's user (AdmissionReview
// request.userInfo.username, as the API server authenticated it).
func withRequester(h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return h.Handle(context.WithValue(ctx, requesterKey{}, req.UserInfo.Username), req)
	})
}

// AWSBudget returns an AWS SDK middleware option for the clients the
// webhooks use: a call made while admitting a request (withRequester) is
// refused before it leaves the process, and not counted as an AWS call,
// when the request's user has spent perSecond calls per second (bursts of
// burst); the webhook then answers "could not check, retry". Calls outside
// admission pass. perSecond <= 0: no budget.
func AWSBudget(perSecond float64, burst int) func(*middleware.Stack) error {
	limits := newKeyedLimiter(perSecond, burst, maxTrackedRequesters)
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("instance-manager-admission-aws-budget",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if user, ok := ctx.Value(requesterKey{}).(string); ok && !limits.allow(user) {
					return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf(
						"%s %s not made: the AWS reads caused by %q's admissions are rate limited (%g per second); retry shortly",
						awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), user, perSecond)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}
