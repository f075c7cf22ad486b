package eks

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

// Auto Scaling API Reference, TerminateInstanceInAutoScalingGroup: an
// instance no longer in a group answers ValidationError "Instance Id not
// found - No managed instance found for instance ID: …"; Terminate takes it
// as done, and nothing else.
func TestInstanceGoneTerminateOfAnInstanceAlreadyGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Auto Scaling: no managed instance", &smithy.GenericAPIError{Code: "ValidationError", Message: "Instance Id not found - No managed instance found for instance ID: i-0abc"}, true},
		{"EC2 InvalidInstanceID.NotFound", fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance ID 'i-0abc' does not exist"}), true},
		{"decrement refused at min size", &smithy.GenericAPIError{Code: "ValidationError", Message: "Currently, desiredSize equals minSize (1). Terminating instance without replacement will violate group's min size constraint."}, false},
		{"scaling activity in progress", &smithy.GenericAPIError{Code: "ScalingActivityInProgress", Message: "Scaling activity is in progress"}, false},
		{"throttled", &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}, false},
		{"not an API error", errors.New("connection reset"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := instanceGone(tc.err); got != tc.want {
				t.Errorf("instanceGone(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
