package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// VersionPackage is the package whose Version and Revision the linker sets.
const VersionPackage = "github.com/instancemgr/instance-manager/version"

// Options say what Build builds.
type Options struct {
	Metadata
	// RepoDir is the root of the instance-manager module. Required.
	RepoDir string
	// Platforms to build; default DefaultPlatforms.
	Platforms []v1.Platform
	// Log receives the go build commands; nil discards them.
	Log func(format string, args ...any)
}

// DefaultMetadata reads the image metadata of the checkout at repoDir:
// Version from its VERSION file, Revision from `git rev-parse HEAD`
// ("-dirty" appended when tracked files differ from HEAD), Created from
// the commit time. Outside a git checkout Revision is "unknown" and
// Created the Unix epoch. Errors: VERSION missing or empty.
func DefaultMetadata(repoDir string) (Metadata, error) {
	b, err := os.ReadFile(filepath.Join(repoDir, "VERSION"))
	if err != nil {
		return Metadata{}, fmt.Errorf("reading the release version: %w", err)
	}
	meta := Metadata{Version: strings.TrimSpace(string(b)), Revision: "unknown", Source: DefaultSource, Created: time.Unix(0, 0).UTC()}
	if meta.Version == "" {
		return Metadata{}, fmt.Errorf("%s is empty; want the release version, e.g. 0.2.0", filepath.Join(repoDir, "VERSION"))
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", repoDir}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return meta, nil // not a git checkout (e.g. a source tarball)
	}
	meta.Revision = rev
	if status, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
		meta.Revision += "-dirty"
	}
	if ct, err := git("log", "-1", "--format=%ct"); err == nil {
		if secs, err := strconv.ParseInt(ct, 10, 64); err == nil {
			meta.Created = time.Unix(secs, 0).UTC()
		}
	}
	return meta, nil
}

// Compile builds the instance-manager binary for platform p into out:
// CGO_ENABLED=0 (static), -trimpath and -buildvcs=false (no paths or VCS
// state of the build machine), symbols stripped, Version and Revision set
// with -X. GOFLAGS, GOAMD64 and GOARM64 of the caller's environment are
// replaced, so that they cannot change the result. Errors: go build
// failing (its output included).
func Compile(ctx context.Context, opts Options, p v1.Platform, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Revision=%s", VersionPackage, opts.Version, VersionPackage, opts.Revision)
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "."}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = opts.RepoDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0")
	if opts.Log != nil {
		opts.Log("GOOS=%s GOARCH=%s CGO_ENABLED=0 go %s", p.OS, p.Architecture, strings.Join(args, " "))
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", p, err, output.String())
	}
	return nil
}

// Build compiles the binary for every platform and writes the image index
// to the OCI layout directory layoutDir (replaced if it exists), under
// the ref name opts.Version. It returns the index's digest. Errors: see
// Compile, Assemble and WriteLayout.
func Build(ctx context.Context, opts Options, layoutDir string) (v1.Hash, error) {
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	tmp, err := os.MkdirTemp("", "instance-manager-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	var paths []string
	for _, p := range opts.Platforms {
		out := filepath.Join(tmp, p.OS+"-"+p.Architecture, "instance-manager")
		if err := Compile(ctx, opts, p, out); err != nil {
			return v1.Hash{}, err
		}
		paths = append(paths, out)
	}
	binaries, err := readFiles(paths)
	if err != nil {
		return v1.Hash{}, err
	}
	idx, err := Assemble(opts.Metadata, opts.Platforms, binaries)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := WriteLayout(layoutDir, idx, opts.Version); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
