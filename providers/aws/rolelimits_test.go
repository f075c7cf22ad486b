package aws

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// recordingIAM records the inputs of the calls WithRoleLimits rewrites.
type recordingIAM struct {
	IAMAPI
	role    *iam.CreateRoleInput
	profile *iam.CreateInstanceProfileInput
}

func (r *recordingIAM) CreateRole(_ context.Context, in *iam.CreateRoleInput, _ ...func(*iam.Options)) (*iam.CreateRoleOutput, error) {
	r.role = in
	return &iam.CreateRoleOutput{}, nil
}

func (r *recordingIAM) CreateInstanceProfile(_ context.Context, in *iam.CreateInstanceProfileInput, _ ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error) {
	r.profile = in
	return &iam.CreateInstanceProfileOutput{}, nil
}

func TestWithRoleLimits(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limits       RoleLimits
		callerPath   *string
		callerBound  *string
		wantBoundary string
	}{
		{"path and boundary are set", RoleLimits{Path: "/im/", PermissionsBoundary: "arn:aws:iam::1:policy/b"}, nil, nil, "arn:aws:iam::1:policy/b"},
		{"the caller cannot choose another path or boundary", RoleLimits{Path: "/im/", PermissionsBoundary: "arn:aws:iam::1:policy/b"}, awssdk.String("/"), awssdk.String("arn:aws:iam::aws:policy/AdministratorAccess"), "arn:aws:iam::1:policy/b"},
		{"no boundary configured: none, even if the caller sets one", RoleLimits{Path: "/im/"}, nil, awssdk.String("arn:aws:iam::1:policy/x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingIAM{}
			api := WithRoleLimits(rec, tc.limits)
			in := &iam.CreateRoleInput{RoleName: awssdk.String("r"), Path: tc.callerPath, PermissionsBoundary: tc.callerBound}
			if _, err := api.CreateRole(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if got := awssdk.ToString(rec.role.Path); got != tc.limits.Path {
				t.Errorf("CreateRole Path = %q, want %q", got, tc.limits.Path)
			}
			if got := awssdk.ToString(rec.role.PermissionsBoundary); got != tc.wantBoundary {
				t.Errorf("CreateRole PermissionsBoundary = %q, want %q", got, tc.wantBoundary)
			}
			if in.Path != tc.callerPath {
				t.Error("the caller's input was modified")
			}
			if _, err := api.CreateInstanceProfile(context.Background(), &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String("r"), Path: tc.callerPath}); err != nil {
				t.Fatal(err)
			}
			if got := awssdk.ToString(rec.profile.Path); got != tc.limits.Path {
				t.Errorf("CreateInstanceProfile Path = %q, want %q", got, tc.limits.Path)
			}
		})
	}
}

func TestRoleLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		limits RoleLimits
		ok     bool
	}{
		{RoleLimits{Path: DefaultIAMPath}, true},
		{RoleLimits{Path: "/"}, false},
		{RoleLimits{Path: "/aws-service-role/"}, false},
		{RoleLimits{Path: "/aws-reserved/sso.amazonaws.com/"}, false},
		{RoleLimits{Path: "/service-role/"}, false},
		{RoleLimits{Path: "/teams/service-role/"}, true},
		{RoleLimits{Path: "/a/b/", PermissionsBoundary: "arn:aws:iam::111122223333:policy/boundary"}, true},
		{RoleLimits{Path: "instance-manager"}, false},
		{RoleLimits{Path: "/instance-manager"}, false},
		{RoleLimits{Path: ""}, false},
		{RoleLimits{Path: "/a/", PermissionsBoundary: "boundary"}, false},
	} {
		if err := tc.limits.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.limits, err, tc.ok)
		}
	}
}
