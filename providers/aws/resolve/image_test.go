package resolve

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

func TestImage(t *testing.T) {
	cases := []struct {
		id       string
		want     Image
		notFound bool
	}{
		{id: "ami-x86", want: Image{ID: "ami-x86", Architecture: "x86_64", OwnerID: "111122223333"}},
		{id: "ami-arm", want: Image{ID: "ami-arm", Architecture: "arm64", OwnerID: "602401143452", OwnerAlias: "amazon"}},
		{id: "ami-gone", notFound: true},
		{id: "ami-bad!", notFound: true},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			g := NewWithT(t)
			im, err := Resolver{EC2: newFakeCloud(), Cache: &Cache{}}.Image(context.Background(), c.id, Within(time.Minute))
			if c.notFound {
				g.Expect(err).To(MatchError(ErrNotFound))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(im).To(Equal(c.want))
		})
	}
}

func TestImageID(t *testing.T) {
	const field = "spec.eks.configuration.image"
	cases := []struct {
		name, image, version string
		annotations          map[string]string
		want                 string
		specErr, err         string // substrings of a *providers.SpecError's or another error's message
		calls                int
	}{
		{name: "an AMI id as is, no call", image: "ami-0abc", version: "1.31", want: "ami-0abc"},
		{name: "latest through the EKS-optimized parameter", image: v1alpha1.ImageLatest, version: "1.31", want: "ami-x86", calls: 1},
		{name: "ssm:// through the named parameter", image: "ssm:///mine/ami", want: "ami-arm", calls: 1},
		{name: "latest for another OS family: its own parameter", image: v1alpha1.ImageLatest, version: "1.31",
			annotations: map[string]string{v1alpha1.AnnotationOSFamily: v1alpha1.OSFamilyBottlerocket},
			specErr:     field + ": SSM parameter /aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id does not exist", calls: 1},
		{name: "a missing parameter is the tenant's to fix", image: "ssm:///mine/gone", specErr: `SSM parameter /mine/gone does not exist (image "ssm:///mine/gone"; valid: an AMI id, "latest", or ssm://<parameter name>)`, calls: 1},
		{name: "latest before the cluster version is known", image: v1alpha1.ImageLatest, err: "the cluster's Kubernetes version is not known"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeCloud()
			id, err := Resolver{SSM: f, Cache: &Cache{}}.ImageID(context.Background(), field, c.image, c.version, c.annotations, Fresh{Found: time.Minute})
			var spec *providers.SpecError
			switch {
			case c.specErr != "":
				g.Expect(errors.As(err, &spec)).To(BeTrue(), "a *providers.SpecError, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(c.specErr))
			case c.err != "":
				g.Expect(errors.As(err, &spec)).To(BeFalse())
				g.Expect(err).To(MatchError(ContainSubstring(c.err)))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(id).To(Equal(c.want))
			}
			g.Expect(f.count("GetParameter")).To(Equal(c.calls))
		})
	}
}
