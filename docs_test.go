package ddbsession_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The package docs of the published modules link into docs/ with full
// URLs (blob/main/ for a file, tree/main/ for a directory); the README and
// docs/*.md link with relative paths.
const docsURL = "https://github.com/ddbsession/ddbsession/blob/main/"

// TestDocsLinks checks that every relative link and anchor in README.md and
// docs/*.md, and every link of a package doc into this repository, names a
// file that exists and, after a #, a heading of that file.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	for _, f := range files {
		for _, problem := range brokenLinks(f, filepath.Dir(f), markdownLinks) {
			t.Error(problem)
		}
	}
	docs := []string{"doc.go", "ddbsessiontest/ddbsessiontest.go", "scsstore/doc.go", "ddbstream/ddbstream.go",
		"mcpsession/doc.go", "ddbsessionotel/doc.go", "ddbsessionoidc/doc.go", "cmd/ddbsession/doc.go"}
	for _, f := range docs {
		for _, problem := range brokenLinks(f, ".", repoURLs) {
			t.Error(problem)
		}
	}
}

// The checker itself: a link checker that passes everything proves nothing.
func TestDocsLinksCatchBrokenOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("docs/b.md", "# B\n\n## On scs: `scsstore`\n\n## Costs\n\n## Costs\n")
	for _, tc := range []struct {
		name, text string
		broken     int
	}{
		{"good links", "# A\n\n## Cost per request\n\n[b](docs/b.md) [s](docs/b.md#on-scs-scsstore) [c](docs/b.md#costs-1) [me](#cost-per-request) [web](https://example.com/x.md#y) ![img](docs/b.md)\n", 0},
		{"missing file", "[x](docs/c.md)\n", 1},
		{"missing anchor", "[x](docs/b.md#speed)\n", 1},
		{"missing anchor here", "# A\n[x](#a-b)\n", 1},
		{"links in code are not links", "```\n[x](docs/c.md)\n```\n`[y](docs/c.md)`\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(tc.name, " ", "-")+".md", tc.text)
			if got := brokenLinks(path, dir, markdownLinks); len(got) != tc.broken {
				t.Errorf("%d broken links, want %d: %q", len(got), tc.broken, got)
			}
		})
	}
	path := write("doc.go", "// See "+docsURL+"docs/b.md#costs, https://github.com/ddbsession/ddbsession/tree/main/docs and "+
		docsURL+"docs/none.md.\npackage p\n")
	if got := brokenLinks(path, dir, repoURLs); len(got) != 1 || !strings.Contains(got[0], "none.md") {
		t.Errorf("a Go file's links: %q, want docs/none.md alone", got)
	}
}

var (
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
	mdLink    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	repoURL   = regexp.MustCompile(`https://github\.com/ddbsession/ddbsession/(?:blob|tree)/main/([^\s)>]*[^\s)>.,;:])`)
	heading   = regexp.MustCompile(`(?m)^#{1,6} +(.+?)(?: +#+)? *$`)
	hasScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// markdownLinks returns the relative targets of a Markdown file's links,
// leaving out code blocks and code spans, each as written and as a path
// from the file's directory.
func markdownLinks(text string) []string {
	text = codeSpan.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
	var links []string
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		if !hasScheme.MatchString(m[1]) {
			links = append(links, m[1])
		}
	}
	return links
}

// repoURLs returns a Go file's links into this repository, as paths from
// the repository's root, which is where the tests run.
func repoURLs(text string) []string {
	var links []string
	for _, m := range repoURL.FindAllStringSubmatch(text, -1) {
		links = append(links, m[1])
	}
	return links
}

// brokenLinks says what is wrong with each link that links finds in file,
// resolving paths from the directory base.
func brokenLinks(file, base string, links func(string) []string) []string {
	text, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, link := range links(string(text)) {
		path, anchor, _ := strings.Cut(link, "#")
		target := file
		if path != "" {
			target = filepath.Join(base, filepath.FromSlash(path))
		}
		if _, err := os.Stat(target); err != nil {
			problems = append(problems, fmt.Sprintf("%s: link %q: no file %s", file, link, target))
			continue
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(target, ".md") {
			problems = append(problems, fmt.Sprintf("%s: link %q: an anchor into a file that is not Markdown", file, link))
			continue
		}
		anchors, err := anchorsOf(target)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		found := false
		for _, a := range anchors {
			found = found || a == anchor
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s: link %q: %s has no heading #%s", file, link, target, anchor))
		}
	}
	return problems
}

// anchorsOf returns the anchors GitHub gives the headings of a Markdown
// file: lowercased, punctuation dropped, spaces turned into hyphens, and
// "-1", "-2"... after a repeated one.
func anchorsOf(file string) ([]string, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	var anchors []string
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(text), ""), -1) {
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, m[1])
		if n := seen[slug]; n > 0 {
			anchors = append(anchors, fmt.Sprintf("%s-%d", slug, n))
		} else {
			anchors = append(anchors, slug)
		}
		seen[slug]++
	}
	return anchors, nil
}
