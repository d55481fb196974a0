package tests

import (
	"bytes"
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

// The repository cites nothing a reader of it cannot open: the developers'
// own reference notes (the ACP wire reference, the legacy-format catalog,
// the peer survey and the rest of the shared folder they live in) are not
// part of it, so no file may name them. And every docs/PAGE.md#anchor that
// a comment, test or page cites must lead to a heading of that page, so
// that renaming a section cannot silently orphan the comments that point
// at it.
func TestDocs_CitesOnlyWhatTheRepositoryHas(t *testing.T) {
	root := repoRoot(t)
	// Spelled in pieces, so that this file does not name them itself.
	outside := []string{
		"acp-spec" + ".md", "legacy-formats" + ".md", "peers" + ".md",
		"admired" + "-code", "shared" + "/docs", "shared" + "/acp",
	}
	cite := regexp.MustCompile(`docs/([a-z0-9-]+\.md)(?:#([a-z0-9_-]+))?`)
	anchorsOf := map[string]map[string]bool{}
	files, cites := 0, 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		files++
		rel, _ := filepath.Rel(root, path)
		text := string(b)
		for _, name := range outside {
			for i := 0; ; {
				j := strings.Index(text[i:], name)
				if j < 0 {
					break
				}
				i += j
				line := strings.Count(text[:i], "\n") + 1
				t.Errorf("%s:%d names %q, a file outside the repository: cite the public ACP specification or docs/agent-protocols.md, or say it in words", rel, line, name)
				i += len(name)
			}
		}
		for _, m := range cite.FindAllStringSubmatchIndex(text, -1) {
			if m[0] > 0 && strings.ContainsAny(text[m[0]-1:m[0]], "/.-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") {
				continue // part of a longer path or name
			}
			cites++
			page := text[m[2]:m[3]]
			line := strings.Count(text[:m[0]], "\n") + 1
			target := filepath.Join(root, "docs", page)
			a, ok := anchorsOf[target]
			if !ok {
				pb, err := os.ReadFile(target)
				if err != nil {
					t.Errorf("%s:%d cites docs/%s, which does not exist", rel, line, page)
					anchorsOf[target] = nil
					continue
				}
				a = headingAnchors(string(pb))
				anchorsOf[target] = a
			}
			if a == nil || m[4] < 0 {
				continue
			}
			if anchor := text[m[4]:m[5]]; !a[anchor] {
				t.Errorf("%s:%d cites docs/%s#%s: no such heading in %s", rel, line, page, anchor, page)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || cites < 50 {
		t.Errorf("only %d files and %d citations of docs/ pages found: is the walk still right?", files, cites)
	}
}
