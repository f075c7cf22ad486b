package chart

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// versionFile returns the release version, the one source of the chart's
// version and appVersion, the image tag and the binary's --version.
func versionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestChartVersionIsTheReleaseVersion: Chart.yaml's version and appVersion
// are the VERSION file's (make set-version changes all three).
func TestChartVersionIsTheReleaseVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	want := versionFile(t)
	if chart.Version != want || chart.AppVersion != want {
		t.Errorf("Chart.yaml has version %q and appVersion %q; VERSION says %q (run make set-version V=%s)", chart.Version, chart.AppVersion, want, want)
	}
}

// TestPackagedChart packages the chart as make release does and checks
// the package: no Go tests or test data in it, and its Deployment's
// default image is the repository at the release version's tag.
func TestPackagedChart(t *testing.T) {
	helm := tool(t, "helm")
	version, dir := versionFile(t), t.TempDir()
	if out, err := run(helm, "package", chartDir, "--version", version, "--app-version", version, "--destination", dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	pkg := filepath.Join(dir, "instance-manager-"+version+".tgz")
	for _, name := range tgzNames(t, pkg) {
		if strings.HasSuffix(name, ".go") || strings.Contains(name, "/testdata/") {
			t.Errorf("the packaged chart holds %s", name)
		}
	}
	manifest, err := run(helm, "template", "instance-manager", pkg, "--namespace", "instance-manager", "--values", writeValues(t, withRequired(nil)))
	if err != nil {
		t.Fatalf("helm template %s: %v", pkg, err)
	}
	r := rendering{manifest: manifest, objects: decodeObjects(t, manifest)}
	d := typed[appsv1.Deployment](t, r.one(t, "Deployment"))
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Image, values.Image.Repository+":"+version; got != want {
		t.Errorf("the packaged chart's default image is %s, want %s", got, want)
	}
	if got := d.Labels["app.kubernetes.io/version"]; got != version {
		t.Errorf("the Deployment's app.kubernetes.io/version is %q, want %q", got, version)
	}
}

// tgzNames lists the entries of a gzipped tar file.
func tgzNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
