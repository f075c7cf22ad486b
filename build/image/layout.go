package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// WriteLayout writes idx as an OCI image layout into dir, replacing what
// is there: index.json lists idx once, annotated with
// org.opencontainers.image.ref.name = refName (the version). The layout is
// written beside dir first and renamed into place, so a failed build
// leaves the previous one intact.
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-") // unique: two builds may run at once
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // left only when a step failed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout %s: %w", tmp, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: refName})); err != nil {
		return fmt.Errorf("writing the image index into %s: %w", tmp, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// ReadLayout returns the image index of an OCI layout WriteLayout wrote
// (the one index listed in index.json). Errors: dir is not such a layout.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout (run make image): %w", dir, err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s/index.json lists %d manifests; want exactly one image index", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// PlatformImage returns the image of platform p (OS and architecture)
// in idx. Errors: idx has none.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
		if d.Platform != nil {
			have = append(have, d.Platform.String())
		}
	}
	return nil, fmt.Errorf("the image index has no %s/%s image; it has %v", p.OS, p.Architecture, have)
}

// Unpack writes the file system of img (its layers flattened) into dest,
// which must be empty or absent, with the owners and modes the layers
// record (owners only when running as root). It returns the image's
// config. Errors: an entry escaping dest, an entry type other than
// directory, regular file or symbolic link, or I/O.
func Unpack(img v1.Image, dest string) (*v1.ConfigFile, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return cf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's file system: %w", err)
		}
		if err := unpackEntry(tr, h, dest); err != nil {
			return nil, fmt.Errorf("unpacking %s: %w", h.Name, err)
		}
	}
}

func unpackEntry(r io.Reader, h *tar.Header, dest string) error {
	name := filepath.Clean("/" + h.Name)
	if name == "/" {
		return nil
	}
	target := filepath.Join(dest, name)
	if !strings.HasPrefix(target, filepath.Clean(dest)+string(filepath.Separator)) {
		return fmt.Errorf("the entry escapes %s", dest)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(h.Mode).Perm()
	if h.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, target)
	default:
		return fmt.Errorf("entry type %q is not a directory, regular file or symbolic link", h.Typeflag)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return err
		}
	}
	return os.Chmod(target, mode)
}

// Digest returns the digest of the image index in the OCI layout dir.
func Digest(dir string) (v1.Hash, error) {
	idx, err := ReadLayout(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
