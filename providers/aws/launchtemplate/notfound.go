package launchtemplate

import (
	"errors"

	"github.com/aws/smithy-go"
)

// Kind is the launch template's resource kind in the GC's metrics and
// providers.Owned.
const Kind = "launch-template"

// IsNotFound reports whether err is EC2's answer for a
// launch template that does not exist (by name or id; a malformed id
// names none either).
func IsNotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFound", "InvalidLaunchTemplateId.Malformed":
			return true
		}
	}
	return false
}
