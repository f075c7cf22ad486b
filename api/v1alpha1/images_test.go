package v1alpha1

import "testing"

func TestImageParameter(t *testing.T) {
	for _, c := range []struct {
		image, version string
		ann            map[string]string
		want           string
		ok             bool
	}{
		{"ami-0123", "1.30", nil, "", false},
		{"", "1.30", nil, "", false},
		{"ssm:///my/ami", "1.30", nil, "/my/ami", true},
		{"latest", "", nil, "", true},
		{"latest", "1.30", nil, "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id", true},
		{"latest", "1.30", map[string]string{AnnotationArchitecture: "arm64"}, "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id", true},
		{"latest", "1.31", map[string]string{AnnotationOSFamily: OSFamilyAmazonLinux2023}, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id", true},
		{"latest", "1.31", map[string]string{AnnotationOSFamily: OSFamilyBottlerocket, AnnotationArchitecture: "arm64"}, "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id", true},
	} {
		got, ok := ImageParameter(c.image, c.version, c.ann)
		if got != c.want || ok != c.ok {
			t.Errorf("ImageParameter(%q, %q, %v) = %q, %v; want %q, %v", c.image, c.version, c.ann, got, ok, c.want, c.ok)
		}
	}
}
