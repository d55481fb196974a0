package bridge

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The link's read loop keeps each frame's event on its stack: a call that
// lets a pointer to it escape (handing it to the loop's code as is, or
// through a func value) makes the compiler move it to the heap for every
// frame read, an allocation per streamed update whether the call is taken
// or not. Handling an event in place cost a quarter of the child stream's
// rate that way before it copied the event (inline.go). The compiler's
// escape analysis says so directly; this reads it.
func TestLinkReadLoopEventStaysOnStack(t *testing.T) {
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gotool, "build", "-gcflags=-m", "-o", filepath.Join(t.TempDir(), "x.a"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "links.go:") && strings.HasSuffix(line, "moved to heap: ev") {
			t.Errorf("the read loop's event escapes: %s", line)
		}
		if strings.Contains(line, "links.go:") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no escape analysis output for links.go:\n%.2000s", out)
	}
}
