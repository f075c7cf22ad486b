package launchtemplate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestIsNotFound(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException"}, true},
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "InvalidLaunchTemplateId.NotFound"}), true},
		{&smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFound"}, true},
		{&smithy.GenericAPIError{Code: "InvalidLaunchTemplateId.Malformed"}, true},
		{&smithy.GenericAPIError{Code: "UnauthorizedOperation"}, false},
		{errors.New("InvalidLaunchTemplateId.NotFound"), false}, // not an API error
		{nil, false},
	} {
		if got := IsNotFound(tc.err); got != tc.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestMetadataSettingsDefaults(t *testing.T) {
	endpoint, tokens, hops := MetadataSettings(nil)
	if endpoint != "enabled" || tokens != "required" || hops != 1 {
		t.Fatalf("MetadataSettings(nil) = %q, %q, %d; want enabled, required, 1", endpoint, tokens, hops)
	}
}
