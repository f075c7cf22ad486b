// Package image builds instance-manager's container image without a
// container engine: it cross-compiles the binary for each platform (static,
// CGO off, -trimpath) and assembles an OCI image index with
// go-containerregistry, from nothing but the Go toolchain and Go modules.
//
// The image has no base image and no shell. Each platform's image is two
// layers:
//
//   - files: /etc/ssl/certs/ca-certificates.crt (the Mozilla roots of
//     golang.org/x/crypto/x509roots/fallback/bundle, so the AWS SDK can
//     verify TLS), /etc/passwd and /etc/group naming the non-root user
//     65532 ("nonroot"), /tmp (1777) and /home/nonroot;
//   - the binary: /usr/local/bin/instance-manager, the entrypoint.
//
// It runs as 65532:65532 and carries the OCI labels
// org.opencontainers.image.source, .version, .revision and .created.
// Every timestamp is Options.Created (the commit time), so the same commit
// and toolchain give the same digest.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Fixed facts of the image.
const (
	// Entrypoint is where the binary is in the image.
	Entrypoint = "/usr/local/bin/instance-manager"
	// CABundlePath is where Go's crypto/x509 looks for the system roots on
	// Linux first.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID the image runs as (distroless' "nonroot").
	UID, GID = 65532, 65532
	// DefaultSource is the org.opencontainers.image.source label.
	DefaultSource = "https://github.com/instancemgr/instance-manager"
)

// OCI annotation and label keys.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	// RefName names the image index inside an OCI layout's index.json.
	RefName = "org.opencontainers.image.ref.name"
)

// DefaultPlatforms are the platforms `make image` builds.
var DefaultPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Metadata is what the image says about itself.
type Metadata struct {
	// Version is the release version (the VERSION file), e.g. "0.2.0".
	// Required.
	Version string
	// Revision is the git commit, "-dirty" when built from a modified
	// tree, or "unknown".
	Revision string
	// Source is the repository URL; default DefaultSource.
	Source string
	// Created is every timestamp in the image (files, config, history);
	// use the commit time for reproducible builds. Truncated to seconds.
	Created time.Time
}

// Assemble returns the multi-platform OCI image index made of the given
// binaries: binaries[i] is the instance-manager executable for
// platforms[i]. Errors: mismatched lengths, no platform, an empty Version,
// or go-containerregistry failing to compute a digest.
func Assemble(meta Metadata, platforms []v1.Platform, binaries [][]byte) (v1.ImageIndex, error) {
	if len(platforms) == 0 || len(platforms) != len(binaries) {
		return nil, fmt.Errorf("Assemble: %d platforms and %d binaries; want one binary per platform and at least one", len(platforms), len(binaries))
	}
	if meta.Version == "" {
		return nil, errors.New("Assemble: Metadata.Version is empty; want the release version, e.g. 0.2.0")
	}
	if meta.Source == "" {
		meta.Source = DefaultSource
	}
	if meta.Revision == "" {
		meta.Revision = "unknown"
	}
	meta.Created = meta.Created.UTC().Truncate(time.Second)

	files, err := filesLayer(meta.Created)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for i, p := range platforms {
		img, err := platformImage(meta, p, files, binaries[i])
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels(meta)).(v1.ImageIndex), nil
}

func labels(meta Metadata) map[string]string {
	return map[string]string{
		LabelSource: meta.Source, LabelVersion: meta.Version, LabelRevision: meta.Revision,
		LabelCreated: meta.Created.Format(time.RFC3339),
	}
}

// platformImage is the image of one platform: the shared files layer, the
// binary's layer, and the config.
func platformImage(meta Metadata, p v1.Platform, files v1.Layer, binary []byte) (v1.Image, error) {
	bin, err := layer(meta.Created, []entry{
		{name: "usr/", mode: 0o755}, {name: "usr/local/", mode: 0o755}, {name: "usr/local/bin/", mode: 0o755},
		{name: Entrypoint[1:], mode: 0o755, data: binary},
	})
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: meta.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: files, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "instance-manager image: CA roots, passwd, /tmp", Comment: "build/image"}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "instance-manager image: " + Entrypoint, Comment: "build/image"}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundlePath},
		Labels:     labels(meta),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(meta)).(v1.Image), nil
}

// filesLayer is the layer every platform shares.
func filesLayer(created time.Time) (v1.Layer, error) {
	roots, err := CABundle()
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	return layer(created, []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CABundlePath[1:], mode: 0o644, data: roots},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID},
		{name: "tmp/", mode: 0o1777},
	})
}

// entry is one file or directory (name ending in "/") of a layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

// layer writes entries, in order, into a gzip-compressed OCI layer whose
// every timestamp is created.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if path.Clean(e.name)+"/" == e.name {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// readFiles reads each path.
func readFiles(paths []string) ([][]byte, error) {
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
