package selfcontained

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// envVars are the variables that give tests the local environment; the
// copy runs without them, which makes those tests skip: the unit tier.
var envVars = []string{"IM_ENV_BIN_DIR", "IM_ENV_VENV", "IM_IMAGE_LAYOUT"}

// TestUnitTierPassesInACopyWithNothingBesideIt copies what a clone of the
// checkout would hold (every file git tracks or would track: tracked and
// untracked-but-not-ignored files, as they are in the working tree, so
// uncommitted work is included) into <tmp>/im-selfcontained-<hash>/
// instance-manager, an otherwise empty directory, and runs `go test ./...`
// there without the environment variables.
//
// The directory's name is fixed per checkout so that Go's build and test
// caches, which key on source paths, serve the next run. It runs in the
// environment tier only (make test), which is also how the copy's own run
// of this test skips itself.
func TestUnitTierPassesInACopyWithNothingBesideIt(t *testing.T) {
	if os.Getenv("IM_ENV_BIN_DIR") == "" {
		t.Skip("compiles the module again in a copy: runs in make test (IM_ENV_BIN_DIR set)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(os.TempDir(), fmt.Sprintf("im-selfcontained-%x", sha256.Sum256([]byte(root)))[:len("im-selfcontained-")+12])
	if err := os.RemoveAll(parent); err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(parent, "instance-manager")
	n, err := copyCheckout(root, copyDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	t.Logf("copied %d files of %s into %s", n, root, copyDir)

	// The copy compiles every package again while up to three other test
	// packages run (make test's -p 4); 20 minutes was once too short on a
	// loaded machine, and 30 stays inside make test's 45-minute timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// -p 1: the environment tier's tests run beside this one.
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-p", "1", "./...")
	cmd.Dir = copyDir
	cmd.Env = withoutVars(os.Environ(), envVars)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("go test ./... in the copy took %s", time.Since(began).Round(time.Second))
	if err != nil {
		t.Fatalf("the unit tier fails in a copy of the checkout with nothing beside it (%v):\n%s", err, out.String())
	}
	for _, pkg := range []string{"boundaries", "charts/instance-manager", "test/install", "build/image"} {
		if !strings.Contains(out.String(), "ok  \tgithub.com/instancemgr/instance-manager/"+pkg+"\t") {
			t.Errorf("package %s did not pass in the copy:\n%s", pkg, out.String())
		}
	}
}

// copyCheckout copies the files `git ls-files` lists for root (tracked,
// and untracked but not ignored) into dest, keeping modes and symbolic
// links, and returns how many it copied. Files deleted in the working
// tree are left out.
func copyCheckout(root, dest string) (int, error) {
	list, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return 0, fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	n := 0
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		from, to := filepath.Join(root, name), filepath.Join(dest, name)
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return n, err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return n, err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				return n, err
			}
			if err := os.Symlink(target, to); err != nil {
				return n, err
			}
		} else if err := copyFile(from, to, fi.Mode().Perm()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// withoutVars returns environ without the variables named.
func withoutVars(environ, names []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
