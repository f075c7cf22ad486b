package aws

import (
	"errors"
	"slices"

	"github.com/aws/smithy-go"
)

// HasErrorCode reports whether err is (or wraps) an AWS API error whose
// code (smithy.APIError.ErrorCode, e.g. "InvalidAMIID.NotFound") is one
// of codes.
func HasErrorCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}
