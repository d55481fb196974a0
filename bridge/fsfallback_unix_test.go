//go:build unix

package bridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// An agent that asks for a FIFO in the session directory, when the engine
// serves fs/* from disk (the editor lacks the capability), gets an error at
// once; reading it used to block a helper goroutine, and shutdown with it.
func TestFSFallback_FIFOInSessionDir(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[]}}`)
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"s1"}}`)
	h.recv()

	start := time.Now()
	h.agentSend(`{"jsonrpc":"2.0","id":"r","method":"fs/read_text_file","params":{"sessionId":"s1","path":"` + fifo + `"}}`)
	got := h.agentRecv()
	if gjson.Get(got, "id").Raw != `"r"` || !strings.Contains(gjson.Get(got, "error.message").Str, "not a regular file") {
		t.Errorf("agent got %s, want an error saying the FIFO is not a regular file", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("answered after %v", d)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":"w","method":"fs/write_text_file","params":{"sessionId":"s1","path":"` + fifo + `","content":"x"}}`)
	if got := h.agentRecv(); !strings.Contains(gjson.Get(got, "error.message").Str, "not a regular file") {
		t.Errorf("agent got %s for a write to the FIFO", got)
	}
}

// Files served from disk may come from the session's additionalDirectories
// as well as its cwd, and from nowhere else.
func TestFSFallback_AdditionalDirectories(t *testing.T) {
	cwd, extra, outside := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, text := range map[string]string{cwd: "in cwd", extra: "in extra", outside: "outside"} {
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[],"additionalDirectories":["` + extra + `"]}}`)
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"s1"}}`)
	h.recv()
	for i, tc := range []struct{ dir, want string }{{cwd, "in cwd"}, {extra, "in extra"}, {outside, ""}} {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"fs/read_text_file","params":{"sessionId":"s1","path":%q}}`, i, filepath.Join(tc.dir, "f.txt")))
		got := h.agentRecv()
		if tc.want != "" && gjson.Get(got, "result.content").Str != tc.want {
			t.Errorf("reading from %s: agent got %s", tc.dir, got)
		}
		if tc.want == "" && !strings.Contains(gjson.Get(got, "error.message").Str, "outside") {
			t.Errorf("reading outside the session's directories: agent got %s", got)
		}
	}
}
