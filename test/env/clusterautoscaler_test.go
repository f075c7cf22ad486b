package env

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestAutoscalerCloudConfigOverridesEveryServiceItCalls(t *testing.T) {
	cfg := AutoscalerCloudConfig("http://127.0.0.1:5000", "us-west-2")
	for _, svc := range []string{"autoscaling", "ec2", "eks"} {
		want := "Service = " + svc + "\nRegion = us-west-2\nURL = http://127.0.0.1:5000\nSigningRegion = us-west-2\n"
		if !strings.Contains(cfg, want) {
			t.Errorf("no override for %s in:\n%s", svc, cfg)
		}
	}
	if strings.Count(cfg, "[ServiceOverride ") != 3 {
		t.Errorf("want 3 ServiceOverride sections:\n%s", cfg)
	}
}

// Where the binary was not built, the error names the file, the tarball
// variable and the way to skip.
func TestMissingAutoscalerSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	_, err := FindClusterAutoscaler()
	if !errors.Is(err, ErrNoClusterAutoscaler) {
		t.Fatalf("err = %v, want ErrNoClusterAutoscaler", err)
	}
	for _, want := range []string{filepath.Join(dir, ClusterAutoscalerBinary), "CA_SOURCE", SkipClusterAutoscalerEnv + "=1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	t.Setenv(BinDirEnv, "")
	if _, err := FindClusterAutoscaler(); !errors.Is(err, ErrNoEnvironment) {
		t.Errorf("without %s: err = %v, want ErrNoEnvironment", BinDirEnv, err)
	}
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "true": true} {
		t.Setenv(SkipClusterAutoscalerEnv, v)
		if SkipClusterAutoscaler() != want {
			t.Errorf("%s=%q: skip = %v, want %v", SkipClusterAutoscalerEnv, v, !want, want)
		}
	}
}
