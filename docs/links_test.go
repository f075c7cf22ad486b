// Package docs holds the manual's reference pages; its tests keep the
// README and every page under docs/ linked correctly: each relative link
// names a file that exists and each #anchor a heading of the file it points
// at (GitHub's heading slugs), and the README stays a front door.
//
// The tests read Markdown line by line for the two things they check (ATX
// headings and inline links, outside fenced code and code spans) rather
// than pull a Markdown parser into go.mod for a test.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is issue 28's bound on the front door: what it is, quick
// start, install, a worked example and links; the reference lives here.
const readmeMaxLines = 300

var (
	// inlineLink matches the "](target" of [text](target) and
	// ![alt](target), which a link's text may reach over a line break; the
	// target ends at the first space (a "title" may follow) or paren.
	inlineLink = regexp.MustCompile(`\]\(<?([^)\s>]*)`)
	// htmlAnchor matches an explicit anchor such as <a id="x"> or name="x".
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// codeSpan matches `code` (one or more backticks, same count to close).
	codeSpan = regexp.MustCompile("(`+)[^`]*?`+")
	heading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// link is one relative link found in a Markdown file.
type link struct {
	file   string // the file that holds it, as given to the checker
	line   int    // 1-based
	target string // as written: path, path#anchor or #anchor
}

// scanned is what a Markdown file offers to the checker: its links and
// the anchors (heading slugs and explicit ids) other files may point at.
type scanned struct {
	links   []link
	anchors map[string]bool
}

// scan reads Markdown text: ATX headings and inline links outside fenced
// code blocks (``` or ~~~), with code spans blanked first so that a link
// written as code is not checked.
func scan(name, text string) scanned {
	s := scanned{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			s.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := Slug(m[2])
			// GitHub numbers repeats: x, x-1, x-2.
			if n := seen[slug]; n > 0 {
				seen[slug] = n + 1
				slug = fmt.Sprintf("%s-%d", slug, n)
			} else {
				seen[slug] = 1
			}
			s.anchors[slug] = true
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			t := m[1]
			if t == "" || strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			s.links = append(s.links, link{file: name, line: i + 1, target: t})
		}
	}
	return s
}

// Slug is GitHub's anchor for a heading's text: the rendered text (code
// spans, links and emphasis reduced to their words) in lower case, with
// every character that is not a letter, digit, space, hyphen or underscore
// dropped and each space turned into a hyphen. Repeats are numbered by scan.
func Slug(text string) string {
	text = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// check resolves every link of the files in docs (name -> text; names are
// slash-separated paths relative to root) and returns one problem per
// broken link: a file that exists neither in docs nor on disk under root,
// or an anchor that no heading of the target Markdown file makes.
func check(root string, files map[string]string) []string {
	all := map[string]scanned{}
	for name, text := range files {
		all[name] = scan(name, text)
	}
	anchorsOf := func(name string) (map[string]bool, bool) {
		if s, ok := all[name]; ok {
			return s.anchors, true
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, false
		}
		s := scan(name, string(b))
		all[name] = s
		return s.anchors, true
	}
	var problems []string
	for name := range files {
		for _, l := range all[name].links {
			path, anchor, _ := strings.Cut(l.target, "#")
			target := name
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), path)))
				if _, inSet := files[target]; !inSet {
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
						problems = append(problems, fmt.Sprintf("%s:%d: link %q: no file %s", l.file, l.line, l.target, target))
						continue
					}
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			anchors, ok := anchorsOf(target)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s cannot be read", l.file, l.line, l.target, target))
				continue
			}
			if !anchors[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s has no heading whose anchor is #%s", l.file, l.line, l.target, target, anchor))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// manual reads README.md and every docs/*.md, keyed by their path from the
// repository root.
func manual(t *testing.T) (root string, files map[string]string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(root, "README.md"))
	files = map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, n)
		files[filepath.ToSlash(rel)] = string(b)
	}
	return root, files
}

// TestEveryLinkResolves fails on a relative link of README.md or docs/*.md
// whose file does not exist, or whose #anchor is no heading of its target.
func TestEveryLinkResolves(t *testing.T) {
	root, files := manual(t)
	if len(files) < 2 {
		t.Fatalf("found %d Markdown files (README.md and docs/*.md), want the README and the docs pages", len(files))
	}
	for _, p := range check(root, files) {
		t.Error(p)
	}
}

// TestReadmeIsAFrontDoor keeps README.md under readmeMaxLines lines and
// linking every page under docs/, so that no page is reachable only by
// browsing the folder.
func TestReadmeIsAFrontDoor(t *testing.T) {
	_, files := manual(t)
	readme := files["README.md"]
	if n := strings.Count(readme, "\n"); n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want under %d: move reference text into a docs/ page and link it", n, readmeMaxLines)
	}
	linked := map[string]bool{}
	for _, l := range scan("README.md", readme).links {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for name := range files {
		if strings.HasPrefix(name, "docs/") && !linked[name] {
			t.Errorf("README.md does not link %s: add it to the README's list of pages", name)
		}
	}
}
