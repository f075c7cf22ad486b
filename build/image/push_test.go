package image

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushToARegistry pushes a layout to go-containerregistry's in-memory
// registry on 127.0.0.1 and pulls the index back by tag.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	idx := assemble(t, testMeta)
	dir := filepath.Join(t.TempDir(), "image")
	if err := WriteLayout(dir, idx, testMeta.Version); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	pushed, err := Push(context.Background(), dir, host+"/team/instance-manager:1.2.3", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if pushed.DigestStr() != want.String() {
		t.Errorf("pushed %s, want digest %s", pushed, want)
	}
	ref, err := name.ParseReference(host+"/team/instance-manager:1.2.3", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("the registry serves %s for the tag, want %s", d, want)
	}
	m, err := got.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Fatalf("pulled index: %v, %d manifests", err, len(m.Manifests))
	}
	if _, err := Push(context.Background(), dir, "not a reference!"); err == nil {
		t.Error("an invalid image reference was accepted")
	}
}
