package image

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testMeta = Metadata{Version: "1.2.3", Revision: "abc123", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

// fakeBinaries stand in for the compiled binaries: what matters here is
// where they land and what surrounds them.
var fakeBinaries = [][]byte{[]byte("amd64 binary"), []byte("arm64 binary")}

func assemble(t *testing.T, meta Metadata) v1.ImageIndex {
	t.Helper()
	idx, err := Assemble(meta, DefaultPlatforms, fakeBinaries)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestIndexIsMultiArchOCI(t *testing.T) {
	idx := assemble(t, testMeta)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
			t.Errorf("manifest %s: media type %s, platform %v", d.Digest, d.MediaType, d.Platform)
			continue
		}
		platforms = append(platforms, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
	if m.Annotations[LabelVersion] != "1.2.3" || m.Annotations[LabelRevision] != "abc123" || m.Annotations[LabelSource] != DefaultSource {
		t.Errorf("index annotations %v", m.Annotations)
	}
}

func TestConfigRunsAsNonRootWithLabels(t *testing.T) {
	idx := assemble(t, testMeta)
	for i, p := range DefaultPlatforms {
		img, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{Entrypoint}) || len(c.Cmd) != 0 {
			t.Errorf("%s: user %q, entrypoint %v, cmd %v", p, c.User, c.Entrypoint, c.Cmd)
		}
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		want := map[string]string{LabelSource: DefaultSource, LabelVersion: "1.2.3", LabelRevision: "abc123", LabelCreated: "2026-01-02T03:04:05Z"}
		for k, v := range want {
			if c.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", p, k, c.Labels[k], v)
			}
		}
		if !cf.Created.Time.Equal(testMeta.Created) {
			t.Errorf("%s: created %s, want %s", p, cf.Created, testMeta.Created)
		}
		for _, h := range cf.History {
			if !h.Created.Time.Equal(testMeta.Created) {
				t.Errorf("%s: history entry %q created %s", p, h.CreatedBy, h.Created)
			}
		}

		root := t.TempDir()
		if _, err := Unpack(img, root); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, Entrypoint))
		if err != nil || !bytes.Equal(got, fakeBinaries[i]) {
			t.Errorf("%s: %s holds %q (%v), want its platform's binary", p, Entrypoint, got, err)
		}
		if fi, err := os.Stat(filepath.Join(root, Entrypoint)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %s mode %v (%v), want 0755", p, Entrypoint, fi.Mode(), err)
		}
		if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
			t.Errorf("%s: /tmp mode %v (%v), want 1777", p, fi.Mode(), err)
		}
	}
}

// TestFileSystemHasCARootsAndNoShell lists every file of the image.
func TestFileSystemHasCARootsAndNoShell(t *testing.T) {
	img, err := PlatformImage(assemble(t, testMeta), DefaultPlatforms[0])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(testMeta.Created) {
			t.Errorf("%s: modification time %s, want %s", h.Name, h.ModTime, testMeta.Created)
		}
		if h.Name == CABundlePath[1:] {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			checkRoots(t, b)
		}
	}
	want := []string{"etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt",
		"home", "home/nonroot", "tmp", "usr", "usr/local", "usr/local/bin", "usr/local/bin/instance-manager"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("the image holds %v, want exactly %v (no shell, nothing else)", names, want)
	}
}

// checkRoots fails t unless pemData is a PEM bundle Go's crypto/x509
// loads, with the roots AWS endpoints chain to.
func checkRoots(t *testing.T, pemData []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("the CA bundle holds no certificate crypto/x509 can load")
	}
	n := strings.Count(string(pemData), "-----BEGIN CERTIFICATE-----")
	if n < 100 {
		t.Errorf("the CA bundle holds %d certificates, want the ~140 Mozilla roots", n)
	}
	var subjects []string
	for rest := pemData; ; {
		var c *x509.Certificate
		c, rest = nextCert(t, rest)
		if c == nil {
			break
		}
		subjects = append(subjects, c.Subject.CommonName)
	}
	for _, want := range []string{"Amazon Root CA 1", "Starfield Services Root Certificate Authority - G2"} {
		if !slices.Contains(subjects, want) {
			t.Errorf("the CA bundle lacks %q, a root of AWS's endpoints", want)
		}
	}
}

func TestReproducible(t *testing.T) {
	a, err := assemble(t, testMeta).Digest()
	if err != nil {
		t.Fatal(err)
	}
	b, err := assemble(t, testMeta).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("the same inputs gave %s and %s", a, b)
	}
	later := testMeta
	later.Created = later.Created.Add(time.Second)
	c, err := assemble(t, later).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Error("another creation time gave the same digest: the time is not in the image")
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	idx := assemble(t, testMeta)
	dir := filepath.Join(t.TempDir(), "image")
	for range 2 { // the second write replaces the first
		if err := WriteLayout(dir, idx, "1.2.3"); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := idx.Digest()
	if got, err := Digest(dir); err != nil || got != want {
		t.Errorf("Digest(layout) = %s, %v; want %s", got, err, want)
	}
	if _, err := ReadLayout(t.TempDir()); err == nil {
		t.Error("an empty directory read as a layout")
	}
	if _, err := PlatformImage(idx, v1.Platform{OS: "linux", Architecture: "s390x"}); err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("a missing platform: %v, want an error naming the platforms there are", err)
	}
}

func TestAssembleErrors(t *testing.T) {
	if _, err := Assemble(testMeta, DefaultPlatforms, fakeBinaries[:1]); err == nil {
		t.Error("one binary for two platforms was accepted")
	}
	if _, err := Assemble(Metadata{}, DefaultPlatforms, fakeBinaries); err == nil || !strings.Contains(err.Error(), "Version") {
		t.Errorf("no version: %v", err)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	dest := t.TempDir()
	err := unpackEntry(strings.NewReader("x"), &tar.Header{Name: "../../etc/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, dest)
	if err != nil {
		t.Fatalf("a name with .. is cleaned to a path inside dest, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest, "etc", "evil")); err != nil {
		t.Errorf("../../etc/evil was not written inside dest: %v", err)
	}
	if err := unpackEntry(nil, &tar.Header{Name: "dev/null", Typeflag: tar.TypeChar}, dest); err == nil {
		t.Error("a device entry was accepted")
	}
}

func TestNumericUser(t *testing.T) {
	for user, want := range map[string][2]uint32{"65532:65532": {65532, 65532}, "1000": {1000, 0}} {
		u, g, err := numericUser(user)
		if err != nil || u != want[0] || g != want[1] {
			t.Errorf("numericUser(%q) = %d, %d, %v", user, u, g, err)
		}
	}
	for _, bad := range []string{"nonroot", "65532:nonroot", ""} {
		if _, _, err := numericUser(bad); err == nil {
			t.Errorf("numericUser(%q) accepted", bad)
		}
	}
}
