package eks

import "testing"

func TestAuthMapARN(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:iam::111122223333:role/instance-manager/prod-team-a-web": "arn:aws:iam::111122223333:role/prod-team-a-web",
		"arn:aws:iam::111122223333:role/a/b/c/r":                          "arn:aws:iam::111122223333:role/r",
		"arn:aws:iam::111122223333:role/r":                                "arn:aws:iam::111122223333:role/r",
		"arn:aws-cn:iam::111122223333:role/p/r":                           "arn:aws-cn:iam::111122223333:role/r",
		"not-an-arn":                                                      "not-an-arn",
	} {
		if got := authMapARN(in); got != want {
			t.Errorf("authMapARN(%q) = %q, want %q", in, got, want)
		}
	}
}
