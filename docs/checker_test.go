package docs

import (
	"reflect"
	"sort"
	"testing"
)

// The slugs of headings this manual has, as GitHub renders them.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Attacks and their tests", "attacks-and-their-tests"},
		{"The crd strategy: which kinds to allow", "the-crd-strategy-which-kinds-to-allow"},
		{"Instance metadata (IMDS)", "instance-metadata-imds"},
		{"1. The image", "1-the-image"},
		{"Compatibility with keikoproj instance-manager", "compatibility-with-keikoproj-instance-manager"},
		{"`spec.eks.configuration` and `--dry-run`", "speceksconfiguration-and---dry-run"},
		{"The [boundary ConfigMap](boundaries.md)", "the-boundary-configmap"},
		{"max_unavailable: 5 × 20 s", "max_unavailable-5--20-s"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// The checker finds each kind of broken link and nothing in what is fine:
// links inside fenced code and code spans are not links; repeated
// headings get -1; a link to a directory or non-Markdown file needs only
// the path.
func TestCheckFindsBrokenLinks(t *testing.T) {
	files := map[string]string{
		"README.md": "# Top\n\n## Notes\n\n## Notes\n\n" +
			"[ok](docs/a.md#section-one) [ok](#notes-1) [ok](docs/) [ok](docs/links_test.go)\n" +
			"[bad file](docs/missing.md) [bad anchor](docs/a.md#nowhere) [bad local](#notes-2)\n" +
			"```sh\n[not a link](nowhere.md)\n```\n`[code](nowhere.md)` [web](https://example.com/x.md#y) [a link over\ntwo lines](docs/gone.md)\n",
		"docs/a.md": "# A\n\n## Section one\n\n[up](../README.md#top) [up bad](../README.md#bottom) <a id=\"kept\"></a>[self](#kept)\n",
	}
	got := check("..", files)
	want := []string{
		`README.md:8: link "docs/a.md#nowhere": docs/a.md has no heading whose anchor is #nowhere`,
		`README.md:8: link "docs/missing.md": no file docs/missing.md`,
		`README.md:8: link "#notes-2": README.md has no heading whose anchor is #notes-2`,
		`README.md:13: link "docs/gone.md": no file docs/gone.md`,
		`docs/a.md:5: link "../README.md#bottom": README.md has no heading whose anchor is #bottom`,
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("check found\n%q\nwant\n%q", got, want)
	}
}
