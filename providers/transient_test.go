package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sdkError is err as the SDK returns it after its last attempt: an
// operation error around a response error around the API error.
func sdkError(code, msg string, status int) error {
	api := &smithy.GenericAPIError{Code: code, Message: msg}
	resp := &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: api}
	return &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstances",
		Err: &retry.MaxAttemptsError{Attempt: 8, Err: resp}}
}

func TestIsTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "instancemgr.keikoproj.io", Resource: "instancegroups"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		// AWS: throttling that outlived the SDK's retries.
		{"EC2 RequestLimitExceeded", sdkError("RequestLimitExceeded", "Request limit exceeded.", 503), true},
		{"Auto Scaling Throttling", sdkError("Throttling", "Rate exceeded", 400), true},
		{"EKS ThrottlingException", sdkError("ThrottlingException", "Rate exceeded", 429), true},
		// AWS: server errors.
		{"EC2 InternalError 500", sdkError("InternalError", "An internal error has occurred", 500), true},
		{"Unavailable 503", sdkError("Unavailable", "", 503), true},
		{"EKS ServerException", sdkError("ServerException", "", 500), true},
		// AWS: eventual consistency and ends-by-itself states.
		{"EC2 InvalidInstanceID.NotFound", sdkError("InvalidInstanceID.NotFound", "The instance ID 'i-0abc' does not exist", 400), true},
		{"EC2 InvalidLaunchTemplateId.NotFound", sdkError("InvalidLaunchTemplateId.NotFound", "", 400), true},
		{"Auto Scaling ScalingActivityInProgress", sdkError("ScalingActivityInProgress", "Scaling activity is in progress", 400), true},
		{"Auto Scaling ResourceContention", sdkError("ResourceContention", "", 500), true},
		{"EC2 InsufficientInstanceCapacity", sdkError("InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity", 500), true},
		{"IAM propagation: EC2 invalid instance profile", sdkError("InvalidParameterValue", "Value (p) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", 400), true},
		{"IAM propagation: EKS role cannot be assumed", sdkError("InvalidParameterException", "Role arn:aws:iam::1:role/r cannot be assumed by EKS", 400), true},
		{"IAM propagation: EKS node role policies not seen yet", sdkError("InvalidParameterException",
			"The provided role doesn't have the Amazon EKS Managed Policies associated with it. Please ensure the following policies [arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy] are attached", 400), true},
		{"IAM propagation: EKS node role trust not seen yet", sdkError("InvalidParameterException",
			"Following required service principals [ec2.amazonaws.com] were not found in the trust relationships of nodeRole arn:aws:iam::1:role/r", 400), true},
		{"EKS InvalidParameterException otherwise", sdkError("InvalidParameterException", "Subnets specified must be in at least two different AZs", 400), false},
		// AWS: terminal.
		{"Auto Scaling ValidationError", sdkError("ValidationError", "Max bound, 2, must be greater than or equal to min bound, 3", 400), false},
		{"EC2 InvalidParameterValue", sdkError("InvalidParameterValue", "Invalid value 'x5.huge' for InstanceType.", 400), false},
		{"EC2 UnauthorizedOperation", sdkError("UnauthorizedOperation", "You are not authorized to perform this operation.", 403), false},
		{"IAM AccessDenied", sdkError("AccessDenied", "User is not authorized to perform iam:CreateRole", 403), false},
		{"EC2 InvalidAMIID.NotFound", sdkError("InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist", 400), false},
		{"Auto Scaling LimitExceeded (quota)", sdkError("LimitExceeded", "You have reached your quota", 400), false},
		// Network.
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"deadline", fmt.Errorf("listing: %w", context.DeadlineExceeded), true},
		{"canceled", context.Canceled, false},
		// Kubernetes API.
		{"k8s Conflict", apierrors.NewConflict(gr, "g", errors.New("modified")), true},
		{"k8s TooManyRequests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"k8s ServerTimeout", apierrors.NewServerTimeout(gr, "update", 1), true},
		{"k8s ServiceUnavailable", apierrors.NewServiceUnavailable("webhook down"), true},
		{"k8s InternalError", apierrors.NewInternalError(errors.New("etcd")), true},
		{"k8s Forbidden (webhook refusal)", apierrors.NewForbidden(gr, "g", errors.New("denied")), false},
		{"k8s Invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "InstanceGroup"}, "g", nil), false},
		{"k8s NotFound", apierrors.NewNotFound(gr, "g"), false},
		// The project's own.
		{"marked", fmt.Errorf("Auto Scaling group x: %w", ErrTransient), true},
		{"Transient()", Transient(errors.New("not visible yet")), true},
		{"spec error", &SpecError{Field: "spec.eks.configuration.image", Detail: "bad"}, false},
		{"plain", errors.New("something else"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTransient(tc.err); got != tc.want {
				t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
