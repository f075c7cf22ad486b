package providers

import "testing"

func TestInstanceID(t *testing.T) {
	for providerID, want := range map[string]string{
		"aws:///us-west-2a/i-0abc":       "i-0abc",
		"aws://us-west-2a/i-0abc":        "i-0abc",
		"aws:///i-0abc":                  "i-0abc",
		"gce://project/zone/i-0abc":      "",
		"aws:///us-west-2a/fargate-ip-1": "",
		"":                               "",
	} {
		if got := InstanceID(providerID); got != want {
			t.Errorf("InstanceID(%q) = %q, want %q", providerID, got, want)
		}
	}
}
