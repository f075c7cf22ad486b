package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// FailCalls returns a copy of cfg whose clients fail the calls fail picks:
// fail gets the operation ("CreateLaunchTemplate") and its input and
// returns the error to answer with, or nil to send the call. The failure
// comes from inside the client's call, before its retries, so the call
// metrics of a manager using cfg count it as one failed call, as they
// would an error from AWS that is not retried.
func FailCalls(cfg aws.Config, fail func(operation string, input any) error) aws.Config {
	c := cfg.Copy()
	c.APIOptions = append(slices.Clip(c.APIOptions), func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("instancemgr/TestFault",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if err := fail(awsmiddleware.GetOperationName(ctx), in.Parameters); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return c
}

// AuthorizationFailure is the error EC2 answers a call with when IAM
// denies it: like AWS's, its text differs on every call (a request id and
// an encoded authorization message).
func AuthorizationFailure() error {
	return &smithy.GenericAPIError{Code: "UnauthorizedOperation", Fault: smithy.FaultClient,
		Message: "RequestID: " + randomText(12) + ", You are not authorized to perform this operation. Encoded authorization failure message: " + randomText(48)}
}

func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
