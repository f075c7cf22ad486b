package aws

import (
	"net/http"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// EC2's no-capacity answers come with HTTP 500 but are not retried by the
// SDK (the group's failure backoff retries them); other server errors and
// throttling still are.
func TestRetryerLeavesCapacityErrorsToTheGroupBackoff(t *testing.T) {
	r := NewRetryer()
	for _, tc := range []struct {
		code  string
		fault smithy.ErrorFault
		want  bool
	}{
		{"InsufficientInstanceCapacity", smithy.FaultServer, false},
		{"InsufficientHostCapacity", smithy.FaultServer, false},
		{"InternalError", smithy.FaultServer, true},
		{"RequestLimitExceeded", smithy.FaultClient, true},
		{"Throttling", smithy.FaultClient, true},
		{"InvalidParameterValue", smithy.FaultClient, false},
	} {
		status := http.StatusBadRequest
		if tc.fault == smithy.FaultServer {
			status = http.StatusInternalServerError // as EC2 sends them
		}
		err := &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: tc.code, Message: "m", Fault: tc.fault}}
		if got := r.IsErrorRetryable(err); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.code, got, tc.want)
		}
	}
}
