package cli

import (
	"os"
	"testing"
)

// `acp-bridge dialects doc` prints docs/profiles.md byte for byte: the
// reference an installed binary shows is the repository's.
func TestDialectsDoc_PrintsDocsProfiles(t *testing.T) {
	want, err := os.ReadFile("../../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runSelf(t, nil, "dialects", "doc")
	if code != 0 || stderr != "" {
		t.Fatalf("dialects doc: exit status %d, stderr %q", code, stderr)
	}
	if stdout != string(want) {
		t.Errorf("dialects doc printed %d bytes that differ from docs/profiles.md's %d", len(stdout), len(want))
	}
	if _, stderr, code := runSelf(t, nil, "dialects", "doc", "zeroclaw"); code != 2 || stderr == "" {
		t.Errorf("dialects doc zeroclaw: exit status %d, stderr %q; want a usage error", code, stderr)
	}
}
