package iamrole

import (
	"testing"
)

func TestRoleNameFromARN(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:iam::123456789012:role/nodes":             "nodes",
		"arn:aws:iam::123456789012:role/team/a/nodes":      "nodes",
		"arn:aws-us-gov:iam::123456789012:role/MyPodRole":  "MyPodRole",
		"arn:aws:iam::123456789012:instance-profile/nodes": "",
		"arn:aws:s3:::bucket":                              "",
		"nodes":                                            "",
	} {
		if got := RoleNameFromARN(arn); got != want {
			t.Errorf("RoleNameFromARN(%q) = %q, want %q", arn, got, want)
		}
	}
}
