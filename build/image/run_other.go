//go:build !linux

package image

import (
	"errors"
	"os/exec"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Command runs the image's entrypoint under chroot, which only Linux has.
func Command(rootfs string, cf *v1.ConfigFile, env []string, args ...string) (*exec.Cmd, error) {
	return nil, errors.New("running the image's entrypoint needs Linux (chroot)")
}
