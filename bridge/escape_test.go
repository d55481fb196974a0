package bridge

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The link's read loop allocates no event per frame: a call that lets a
// pointer to an event declared in the loop escape makes the compiler move
// it to the heap for every frame read, an allocation per streamed update.
// The loop's one event, reused for every frame, is declared before the
// loop: the parser, an interface, takes a pointer to its envelope, so it
// lives on the heap, once per link. The compiler's escape analysis says
// which; this reads it.
func TestLinkReadLoopEventStaysOnStack(t *testing.T) {
	src, err := os.ReadFile("links.go")
	if err != nil {
		t.Fatal(err)
	}
	decl := 0
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "var ev agentEvent") {
			decl = i + 1
		}
	}
	if decl == 0 {
		t.Fatal("links.go declares no reused event (var ev agentEvent)")
	}
	out, err := exec.Command("go", "build", "-gcflags=-m", "-o", filepath.Join(t.TempDir(), "x.a"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "links.go:") && strings.HasSuffix(line, "moved to heap: ev") &&
			!strings.Contains(line, fmt.Sprintf("links.go:%d:", decl)) {
			t.Errorf("an event of the read loop escapes, other than the one reused: %s", line)
		}
		if strings.Contains(line, "links.go:") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no escape analysis output for links.go:\n%.2000s", out)
	}
}
