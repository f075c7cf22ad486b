package providers

import (
	"context"
	"errors"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// transientCodes are AWS error codes (smithy.APIError.ErrorCode) that
// describe a state which ends by itself, beyond what the SDK's own retry
// classification (retry.DefaultRetryables, retry.DefaultThrottles: 5xx,
// throttling, connection errors) already calls retryable:
//   - EC2 eventual consistency (EC2 API Reference, "Eventual consistency in
//     the Amazon EC2 API"): an id just returned by a create call may answer
//     InvalidInstanceID.NotFound, InvalidLaunchTemplateId.NotFound, … for a
//     while.
//   - Auto Scaling: ScalingActivityInProgress and ResourceContention (the
//     API Reference's "try again later" faults).
//   - EKS: ResourceInUseException/ResourceLimitExceeded are terminal, but
//     ServerException and ServiceUnavailableException are the service's
//     own transient failures.
//   - Capacity: InsufficientInstanceCapacity and friends (EC2 User Guide,
//     "Troubleshoot instance launch issues"): AWS works on adding capacity;
//     the SDK is told not to retry them (providers/aws noRetryCapacity), the
//     reconciler does, with backoff.
var transientCodes = map[string]bool{
	"InvalidInstanceID.NotFound":                  true,
	"InvalidLaunchTemplateId.NotFound":            true,
	"InvalidLaunchTemplateName.NotFoundException": true,
	"InvalidGroup.NotFound":                       true,
	"InvalidSubnetID.NotFound":                    true,
	"IncorrectState":                              true,
	"ScalingActivityInProgress":                   true,
	"ResourceContention":                          true,
	"ServerException":                             true,
	"ServiceUnavailableException":                 true,
	"ServiceUnavailable":                          true,
	"Unavailable":                                 true,
	"InternalError":                               true,
	"InternalFailure":                             true,
	"InsufficientInstanceCapacity":                true,
	"InsufficientCapacity":                        true,
	"InsufficientHostCapacity":                    true,
	"InsufficientReservedInstanceCapacity":        true,
}

// iamPropagation are message fragments of refusals AWS gives while a role
// or instance profile created a moment ago has not propagated (IAM User
// Guide, "Changes that I make are not always immediately visible"): EC2's
// "Invalid IAM Instance Profile name", EKS's "role … cannot be assumed" /
// "is not authorized to perform: sts:AssumeRole", and EKS CreateNodegroup's
// InvalidParameterException for a node role whose policy attachments or
// trust policy it does not see yet ("The provided role doesn't have the
// Amazon EKS Managed Policies associated with it", "Following required
// service principals [ec2.amazonaws.com] were not found in the trust
// relationships of nodeRole"). A role that really lacks them is reported
// as an Error once the failure has lasted (reconciler/instancegroup
// transient.go: 5 attempts and 5 minutes).
var iamPropagation = []string{
	"invalid iam instance profile",
	"cannot be assumed",
	"sts:assumerole",
	"doesn't have the amazon eks managed policies",
	"were not found in the trust relationships",
}

// ErrTransient marks an error of the project's own making as transient
// (for example "Auto Scaling group not found" right after its creation):
// wrap it with fmt.Errorf("…: %w", ErrTransient) or Transient.
var ErrTransient = errors.New("transient")

// Transient returns err marked transient (IsTransient true); nil stays nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

type transientError struct{ error }

func (e transientError) Unwrap() []error { return []error{e.error, ErrTransient} }

// IsTransient reports whether err describes a failure that ends by itself
// (throttling, a server error, a lost connection, eventual consistency,
// IAM propagation, a conflict with another writer), so that the same call
// may succeed later without anything being changed; false for nil and for
// everything else (a refused or invalid request, a missing permission, an
// object that is not there, a spec error). It is the one classification the
// reconciler uses to choose between Degraded (retry) and Error.
//
// AWS errors (smithy.APIError, through the SDK's *retry.MaxAttemptsError
// and operation wrappers) are classified by the SDK's own retry rules
// (retry.DefaultRetryables and retry.DefaultThrottles) and transientCodes;
// Kubernetes API errors by k8s.io/apimachinery/pkg/api/errors (Conflict,
// ServerTimeout, Timeout, TooManyRequests, InternalError,
// ServiceUnavailable, an unexpected 5xx); a context deadline is transient,
// a canceled context is not (the manager is stopping).
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if transientCodes[ae.ErrorCode()] {
			return true
		}
		msg := strings.ToLower(ae.ErrorMessage())
		for _, m := range iamPropagation {
			if strings.Contains(msg, m) {
				return true
			}
		}
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == awssdk.TrueTernary {
		return true
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == awssdk.TrueTernary {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
	}
	return false
}
