package rules

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// A shipped profile that reads a third-party agent's format says where that
// format is published, as a link a reader can follow, and cites nothing
// that is not public. chat-lines describes a generic shape, not one
// agent's, so it has no source to cite.
func TestShippedProfiles_CitePublicSources(t *testing.T) {
	generic := map[string]bool{"chat-lines.hcl": true}
	link := regexp.MustCompile(`https://(github\.com|docs\.openinterpreter\.com)/\S+`)
	files, err := fs.Glob(profileFiles, "profiles/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped profiles: %v", err)
	}
	for _, name := range files {
		src, err := fs.ReadFile(profileFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		// The header: the comment lines before the first attribute.
		var header strings.Builder
		for _, line := range strings.Split(string(src), "\n") {
			if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
				break
			}
			header.WriteString(line + "\n")
		}
		base := strings.TrimPrefix(name, "profiles/")
		if strings.Contains(header.String(), ".md §") || strings.Contains(header.String(), "legacy-formats") {
			t.Errorf("%s cites a document that is not in the repository:\n%s", base, header.String())
		}
		if !generic[base] && !link.MatchString(header.String()) {
			t.Errorf("%s's header names no public source (a https://github.com/… or documentation link):\n%s", base, header.String())
		}
	}
}
