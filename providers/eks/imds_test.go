package eks

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestLaunchTemplateMetadataOptions(t *testing.T) {
	in := launchInput{imageID: "ami-1", profileName: "prof"}
	for _, tc := range []struct {
		name         string
		set          *v1alpha1.MetadataOptions
		wantTokens   string
		wantHops     int32
		wantEndpoint string
	}{
		{"unset: IMDSv2 only, one hop", nil, "required", 1, "enabled"},
		{"empty: the same defaults", &v1alpha1.MetadataOptions{}, "required", 1, "enabled"},
		{"the admin loosens the hop limit only", &v1alpha1.MetadataOptions{HttpPutResponseHopLimit: 2}, "required", 2, "enabled"},
		{"the admin allows IMDSv1", &v1alpha1.MetadataOptions{HttpTokens: "optional"}, "optional", 1, "enabled"},
		{"the admin turns IMDS off", &v1alpha1.MetadataOptions{HttpEndpoint: "disabled"}, "required", 1, "disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := launchTemplateData(eksGroup(v1alpha1.EKSConfiguration{InstanceType: "m5.large", MetadataOptions: tc.set}), in)
			m := d.MetadataOptions
			if m == nil {
				t.Fatal("launch template data without MetadataOptions: the account default (possibly IMDSv1) would apply")
			}
			if string(m.HttpTokens) != tc.wantTokens || awssdk.ToInt32(m.HttpPutResponseHopLimit) != tc.wantHops || string(m.HttpEndpoint) != tc.wantEndpoint {
				t.Errorf("MetadataOptions = tokens %q, hops %d, endpoint %q; want %q, %d, %q",
					m.HttpTokens, awssdk.ToInt32(m.HttpPutResponseHopLimit), m.HttpEndpoint, tc.wantTokens, tc.wantHops, tc.wantEndpoint)
			}
		})
	}
}
