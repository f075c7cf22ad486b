// Package version reports which build of instance-manager is running: the
// release version, the git revision it was built from and the Go toolchain.
//
// Release builds (`make image`, `make release`) set Version and Revision
// with the linker:
//
//	-X github.com/instancemgr/instance-manager/version.Version=0.2.0
//	-X github.com/instancemgr/instance-manager/version.Revision=<git sha>
//
// A plain `go build` leaves them empty; Get then falls back to the module
// build information Go embeds in every binary (the vcs.revision setting,
// when the build stamped it).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X) in release builds; empty otherwise.
var (
	// Version is the release version, e.g. "0.2.0" (the VERSION file).
	Version string
	// Revision is the full git commit the binary was built from, with a
	// "-dirty" suffix when the tree had uncommitted changes.
	Revision string
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version, or "devel" for a build without one.
	Version string
	// Revision is the git commit, or "unknown".
	Revision string
	// GoVersion is the Go toolchain that compiled the binary, e.g. "go1.26.8".
	GoVersion string
	// Platform is GOOS/GOARCH, e.g. "linux/amd64".
	Platform string
}

// Get returns the running binary's build information.
func Get() Info {
	info := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(info, bi)
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// fromBuildInfo fills what the linker did not set from bi: the revision
// from the vcs.revision setting (marked dirty by vcs.modified), the
// toolchain from bi.GoVersion.
func fromBuildInfo(info Info, bi *debug.BuildInfo) Info {
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Revision != "" {
		return info
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if info.Revision != "" && modified {
		info.Revision += "-dirty"
	}
	return info
}

// String is the one line `instance-manager --version` prints, e.g.
// "instance-manager 0.2.0 (revision 0123abc..., go1.26.8, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("instance-manager %s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}
