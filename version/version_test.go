package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99.1", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name string
		in   Info
		bi   *debug.BuildInfo
		want Info
	}{
		{"the linker's revision wins", Info{Revision: "fromldflags"}, stamped, Info{Revision: "fromldflags", GoVersion: "go1.99.1"}},
		{"vcs stamp, dirty tree", Info{}, stamped, Info{Revision: "abc123-dirty", GoVersion: "go1.99.1"}},
		{"vcs stamp, clean tree", Info{}, &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}}, Info{Revision: "abc123"}},
		{"no stamp", Info{GoVersion: "go1.0"}, &debug.BuildInfo{}, Info{GoVersion: "go1.0"}},
	} {
		if got := fromBuildInfo(tc.in, tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestGetDefaultsAndString(t *testing.T) {
	i := Get() // a test binary: no -X, no vcs stamp under go test
	if i.Version != "devel" || i.GoVersion == "" || i.Platform == "" {
		t.Errorf("Get() = %+v", i)
	}
	s := Info{Version: "0.2.0", Revision: "abc", GoVersion: "go1.26.8", Platform: "linux/arm64"}.String()
	if want := "instance-manager 0.2.0 (revision abc, go1.26.8, linux/arm64)"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}
