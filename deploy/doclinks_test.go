package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README and docs/ point at each other's sections by anchor
// ("docs/operations.md#the-milter-socket", a page's contents list). A
// renamed heading breaks such a link silently, so every relative link of
// these pages must name a file that exists and, with a fragment, a heading
// of that file (as GitHub derives its anchor).
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(withoutCode(string(b)), "\n") {
			for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, frag, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link to %q: %v", page, i+1, target, err)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if !anchorsOf(path)[frag] {
					t.Errorf("%s:%d: link to %q: %s has no heading with that anchor", page, i+1, target, path)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found: the pattern no longer matches the pages")
	}
}

// mdLinkRE matches an inline Markdown link's target: [text](target).
var mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// withoutCode blanks fenced and indented code blocks (four spaces after a
// blank line), where "](" is text, not a link; lines keep their numbers.
func withoutCode(doc string) string {
	lines := strings.Split(doc, "\n")
	fence, indented := false, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			fence = !fence
			lines[i] = ""
		case fence:
			lines[i] = ""
		case strings.HasPrefix(l, "    ") && (indented || i == 0 || strings.TrimSpace(lines[i-1]) == ""):
			indented = true
			lines[i] = ""
		case strings.TrimSpace(l) != "":
			indented = false
		}
	}
	return strings.Join(lines, "\n")
}

// headingAnchors returns the anchors GitHub gives a page's headings:
// lower-cased, every character but letters, digits, '-', '_' and spaces
// dropped, spaces made '-', and a repeated anchor suffixed -1, -2, ….
func headingAnchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range strings.Split(withoutCode(doc), "\n") {
		t := strings.TrimLeft(l, "#")
		if len(t) == len(l) || len(l)-len(t) > 6 || !strings.HasPrefix(t, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(t)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}
