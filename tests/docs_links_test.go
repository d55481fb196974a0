package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The user's documentation is the README and the pages under docs/. Every
// relative link in them must lead somewhere: to a file of the repository
// (never one outside it) and, when it names an anchor, to a heading of
// that file. Moving a section from one page to another breaks exactly
// these links; this test finds them.
func TestDocs_RelativeLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	if len(docs) < 5 {
		t.Fatalf("only %d pages under docs/", len(docs))
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchorsOf[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(b)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(link, "#")
			target := filepath.Join(root, page)
			if file != "" {
				target = filepath.Join(filepath.Dir(target), filepath.FromSlash(file))
				rel, err := filepath.Rel(root, target)
				if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", page, link)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %v", page, link, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q names an anchor in a file that is not Markdown", page, link)
				continue
			}
			if !anchors(target)[anchor] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", page, link, anchor, filepath.Base(target))
			}
		}
	}
	if links < 20 {
		t.Errorf("only %d relative links found: is the link pattern still right?", links)
	}
}

// markdownLinks returns the targets of the inline links ](target) outside
// fenced code blocks and code spans.
func markdownLinks(text string) []string {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	span := regexp.MustCompile("`[^`]*`")
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = span.ReplaceAllString(line, "")
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a page's headings:
// lower case, punctuation other than '-' and '_' dropped, spaces as '-',
// a repeated anchor suffixed -1, -2, ….
func headingAnchors(text string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	seen := map[string]int{}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
