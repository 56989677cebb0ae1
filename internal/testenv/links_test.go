package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds README.md: what a newcomer reads in five minutes.
// Reference material lives in docs/.
const maxReadmeLines = 250

// TestReadmeLength: README.md has at most maxReadmeLines lines.
func TestReadmeLength(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material into docs/", n, maxReadmeLines)
	}
}

// TestDocsLinks: every relative link in README.md, docs/*.md and
// examples/*/README.md names a file or directory that exists, and every
// #anchor names a heading of the Markdown file it points into.
func TestDocsLinks(t *testing.T) {
	root := RepoRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 8 {
		t.Fatalf("found %d Markdown files; the globs are broken", len(files))
	}
	anchors := map[string]map[string]bool{} // file -> its anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(data))
		anchors[path] = a
		return a, nil
	}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, link := range relativeLinks(string(data)) {
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, link)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s links to %s: an anchor into a file that is not Markdown", rel, link)
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", rel, link, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s links to %s: no heading with anchor #%s there", rel, link, anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d relative links; the link parser is broken", checked)
	}
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	schemeRE     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// relativeLinks returns the targets of the Markdown links of doc that are
// not absolute URLs, outside code blocks and code spans.
func relativeLinks(doc string) []string {
	var links []string
	for _, line := range proseLines(doc) {
		line = inlineCodeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if target := m[1]; !schemeRE.MatchString(target) {
				links = append(links, target)
			}
		}
	}
	return links
}

// proseLines returns the lines of doc outside fenced code blocks.
func proseLines(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of doc:
// the heading text in lower case, spaces as hyphens, other punctuation
// dropped, and -1, -2, ... appended to repeats.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(doc) {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		slug := slugify(strings.TrimSpace(text))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// slugify turns a heading into its anchor as GitHub does.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestHeadingAnchors(t *testing.T) {
	doc := "# mcpush on AWS Lambda\n```\n# not a heading\n```\n### `AuthType=NONE`\n## Push costs\n## Push costs\n#hashtag\n"
	got := headingAnchors(doc)
	for _, want := range []string{"mcpush-on-aws-lambda", "authtypenone", "push-costs", "push-costs-1"} {
		if !got[want] {
			t.Errorf("headingAnchors lacks %q: %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("headingAnchors = %v, want 4 anchors", got)
	}
	links := relativeLinks("see [a](docs/a.md#x), [b](https://b.example), `[c](c.md)`\n```\n[d](d.md)\n```\n[e](#e \"title\")")
	if strings.Join(links, " ") != "docs/a.md#x #e" {
		t.Errorf("relativeLinks = %q, want [docs/a.md#x #e]", links)
	}
}
