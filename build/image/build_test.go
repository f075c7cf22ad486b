package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ImageLayoutEnv names the OCI layout `make image` wrote; `make test` sets
// it (see the Makefile's TEST_ENV).
const ImageLayoutEnv = "IM_IMAGE_LAYOUT"

// TestBuildIsReproducibleAndRuns builds the real image from this checkout
// (both platforms) and checks that the result has the digest of the
// image `make image` built from the same tree, or, without one, of a
// second build; then runs the unpacked amd64 (or this machine's)
// entrypoint with --version as uid 65532 under chroot.
//
// It compiles twice per platform when cold (minutes), so it runs with the
// local environment's tier only (make test).
func TestBuildIsReproducibleAndRuns(t *testing.T) {
	if os.Getenv("IM_ENV_BIN_DIR") == "" {
		t.Skip("builds the image for every platform: runs in make test (IM_ENV_BIN_DIR set)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := DefaultMetadata(repo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	build := func() (v1.Hash, string) {
		dir := filepath.Join(t.TempDir(), "image")
		began := time.Now()
		digest, err := Build(ctx, Options{Metadata: meta, RepoDir: repo, Log: t.Logf}, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("built %s in %s", digest, time.Since(began).Round(time.Second))
		return digest, dir
	}
	digest, dir := build()
	if want, ok := madeDigest(t, meta); ok {
		if digest != want {
			t.Errorf("building again gave %s; %s (make image, same tree, revision %s) has %s", digest, os.Getenv(ImageLayoutEnv), meta.Revision, want)
		}
	} else if again, _ := build(); again != digest {
		t.Errorf("two builds of the same tree gave %s and %s", digest, again)
	}

	if os.Geteuid() != 0 {
		t.Skip("running the entrypoint under chroot as uid 65532 needs root")
	}
	idx, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := PlatformImage(idx, v1.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	cf, err := Unpack(img, rootfs)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Command(rootfs, cf, nil, "--version")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s --version in the image as %s: %v\n%s", Entrypoint, cf.Config.User, err, out.String())
	}
	got := strings.TrimSpace(out.String())
	for _, want := range []string{"instance-manager " + meta.Version + " ", "revision " + meta.Revision + ",", runtime.Version(), "linux/" + runtime.GOARCH} {
		if !strings.Contains(got, want) {
			t.Errorf("--version printed %q, want it to contain %q", got, want)
		}
	}
}

// madeDigest returns the digest of the image `make image` wrote
// ($IM_IMAGE_LAYOUT) when it was built from the same revision as meta's;
// false when there is none or it is of another revision (a commit since),
// and the test builds a second time instead.
func madeDigest(t *testing.T, meta Metadata) (v1.Hash, bool) {
	t.Helper()
	made := os.Getenv(ImageLayoutEnv)
	if made == "" {
		return v1.Hash{}, false
	}
	idx, err := ReadLayout(made)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if rev := m.Annotations[LabelRevision]; rev != meta.Revision {
		t.Logf("%s is of revision %s, this tree is %s: building twice instead", made, rev, meta.Revision)
		return v1.Hash{}, false
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return digest, true
}
