package image

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Command returns a command that runs the image's entrypoint with args
// the way a container runtime would start it, minus the namespaces: chroot
// into rootfs (a directory Unpack filled), as the config's numeric
// user:group, in its working directory, with its environment followed by
// env. The process is killed if the caller dies. Needs root (chroot,
// setuid). Errors: no entrypoint, or a user that is not numeric uid[:gid].
func Command(rootfs string, cf *v1.ConfigFile, env []string, args ...string) (*exec.Cmd, error) {
	c := cf.Config
	if len(c.Entrypoint) == 0 {
		return nil, fmt.Errorf("the image config has no entrypoint")
	}
	uid, gid, err := numericUser(c.User)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: c.Entrypoint[0], // resolved inside rootfs, after the chroot
		Args: append(append([]string{}, c.Entrypoint...), args...),
		Env:  append(append([]string{}, c.Env...), env...),
		Dir:  c.WorkingDir,
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     rootfs,
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	return cmd, nil
}

// numericUser parses the config's User, "uid" or "uid:gid", both numeric
// (names would need the image's /etc/passwd, and Kubernetes' runAsNonRoot
// cannot check a name). Without a gid the group is 0, as runtimes do when
// they do not read /etc/passwd.
func numericUser(user string) (uid, gid uint32, err error) {
	u, g, hasGroup := strings.Cut(user, ":")
	n, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("image config User %q: want a numeric uid or uid:gid", user)
	}
	var m uint64
	if hasGroup {
		if m, err = strconv.ParseUint(g, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("image config User %q: want a numeric uid or uid:gid", user)
		}
	}
	return uint32(n), uint32(m), nil
}
