package v1alpha1

import (
	"fmt"
	"strings"
)

// Image references of spec.eks.configuration.image that are not AMI ids.
const (
	// ImageLatest is the EKS-optimized AMI for the cluster's Kubernetes
	// version, the group's OS family and architecture.
	ImageLatest = "latest"
	// ImageSSMPrefix starts an SSM parameter reference: ssm://<name>.
	ImageSSMPrefix = "ssm://"
)

// ImageParameter returns the SSM Parameter Store parameter whose value is
// the AMI id that image resolves to, and true; "" and false when image is
// an AMI id (or empty). "latest" is the EKS-optimized AMI's public
// parameter for clusterVersion (e.g. "1.30"), the OS family
// (AnnotationOSFamily, amazonlinux2 by default) and the architecture
// (AnnotationArchitecture, x86_64 by default) in annotations; with no
// clusterVersion it is "" and true (not resolvable yet). Source: EKS User
// Guide, "Retrieve recommended Amazon Linux AMI IDs" and the Bottlerocket
// and Windows equivalents.
func ImageParameter(image, clusterVersion string, annotations map[string]string) (string, bool) {
	switch {
	case image == ImageLatest:
		if clusterVersion == "" {
			return "", true
		}
		return LatestImageParameter(clusterVersion, OSFamilyOf(annotations), annotations[AnnotationArchitecture]), true
	case strings.HasPrefix(image, ImageSSMPrefix):
		return strings.TrimPrefix(image, ImageSSMPrefix), true
	}
	return "", false
}

// LatestImageParameter is the public SSM parameter holding the
// EKS-optimized AMI id for a Kubernetes version, OS family (OSFamily*)
// and architecture ("x86_64", the default when "", or "arm64").
func LatestImageParameter(version, osFamily, arch string) string {
	if arch == "" {
		arch = "x86_64"
	}
	switch osFamily {
	case OSFamilyAmazonLinux2023:
		return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/recommended/image_id", version, arch)
	case OSFamilyBottlerocket:
		return fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/%s/latest/image_id", version, arch)
	case OSFamilyWindows:
		return fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-%s/image_id", version)
	default:
		if arch == "arm64" {
			return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2-arm64/recommended/image_id", version)
		}
		return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2/recommended/image_id", version)
	}
}

// OSFamilyOf is the OS family an InstanceGroup's annotations name
// (AnnotationOSFamily), OSFamilyAmazonLinux2 when they name none.
func OSFamilyOf(annotations map[string]string) string {
	if f := annotations[AnnotationOSFamily]; f != "" {
		return f
	}
	return OSFamilyAmazonLinux2
}
