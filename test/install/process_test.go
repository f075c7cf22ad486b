package install_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/build/image"
	"github.com/instancemgr/instance-manager/test/install"
)

// checkContainerProcess checks that the replica is the image's entrypoint
// as the chart's securityContext asks for it: the binary from the unpacked
// image, chrooted into it, running as uid and gid 65532 (the chart's
// runAsUser and runAsGroup), with no other group.
func checkContainerProcess(t *testing.T, m *install.Manager, rel *install.Release) {
	t.Helper()
	proc := fmt.Sprintf("/proc/%d", m.Pid())
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	c, err := rel.ManagerContainer()
	if err != nil {
		t.Fatal(err)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil {
		t.Fatalf("the chart's manager container has no runAsUser/runAsGroup: %+v", sc)
	}
	uid, gid := fmt.Sprint(*sc.RunAsUser), fmt.Sprint(*sc.RunAsGroup)
	if want := strings.Repeat(uid+" ", 3) + uid; fields["Uid"] != want {
		t.Errorf("the replica's uids (real, effective, saved, fs) are %q, want %q", fields["Uid"], want)
	}
	if want := strings.Repeat(gid+" ", 3) + gid; fields["Gid"] != want {
		t.Errorf("the replica's gids are %q, want %q", fields["Gid"], want)
	}
	if fields["Groups"] != "" {
		t.Errorf("the replica has supplementary groups %q, want none", fields["Groups"])
	}
	if m.Image.Config.User != uid+":"+gid {
		t.Errorf("the image runs as %q, the chart as %s:%s", m.Image.Config.User, uid, gid)
	}
	root, err := os.Readlink(proc + "/root")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.EvalSymlinks(m.Rootfs); root != want {
		t.Errorf("the replica's root is %s, want the unpacked image %s", root, want)
	}
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, image.Entrypoint); exe != want && exe != image.Entrypoint {
		t.Errorf("the replica runs %s, want the image's entrypoint %s", exe, want)
	}
}
