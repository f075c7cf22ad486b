package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push publishes the image index of the OCI layout dir (what Build wrote)
// to the registry as image ("registry/repository:tag"), with the
// credentials of the Docker config (~/.docker/config.json and its
// credential helpers) plus opts, and returns the pushed reference by
// digest ("registry/repository@sha256:..."). Errors: an image that does not
// parse as a reference, dir not being a layout, or the registry refusing
// (its error, e.g. UNAUTHORIZED, is included).
func Push(ctx context.Context, dir, image string, opts ...name.Option) (name.Digest, error) {
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image %q: %w (want registry/repository:tag)", image, err)
	}
	idx, err := ReadLayout(dir)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return ref.Context().Digest(digest.String()), nil
}
