package flawed

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// conn runs the agent with set on pipes and returns a line sender and a
// line reader.
func conn(t *testing.T, set Set) (send func(string), recv func() string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(inR, outW, set); outW.Close() }()
	t.Cleanup(func() { inW.Close(); <-done })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send = func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	recv = func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line from the agent within 10s")
			return ""
		}
	}
	return send, recv
}

func TestConformantSession(t *testing.T) {
	send, recv := conn(t, nil)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if l := recv(); gjson.Get(l, "result.protocolVersion").Raw != "1" || gjson.Get(l, "jsonrpc").String() != "2.0" {
		t.Fatalf("initialize answer %s", l)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if l := recv(); gjson.Get(l, "result.sessionId").String() != "flawed-1" {
		t.Fatalf("session/new answer %s", l)
	}
	send(`{not json`)
	if l := recv(); gjson.Get(l, "error.code").Int() != -32700 || gjson.Get(l, "id").Raw != "null" {
		t.Fatalf("parse error answer %s", l)
	}
	send(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"flawed-1","prompt":[{"type":"text","text":"hello"}]}}`)
	var text strings.Builder
	for {
		l := recv()
		if gjson.Get(l, "id").String() == "p" {
			if gjson.Get(l, "result.stopReason").String() != "end_turn" {
				t.Fatalf("prompt answer %s", l)
			}
			break
		}
		text.WriteString(gjson.Get(l, "params.update.content.text").String())
	}
	if text.String() != "Hello, world." {
		t.Fatalf("streamed %q", text.String())
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"nope"}`)
	if l := recv(); gjson.Get(l, "error.code").Int() != -32601 {
		t.Fatalf("unknown method answer %s", l)
	}
}

func TestDefectCanceledSpelling(t *testing.T) {
	send, recv := conn(t, Set{CanceledSpelling: true})
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	recv()
	send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	recv()
	send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"flawed-1","prompt":[{"type":"text","text":"wait-cancel"}]}}`)
	send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"flawed-1"}}`)
	if l := recv(); gjson.Get(l, "result.stopReason").String() != "canceled" {
		t.Fatalf("cancelled prompt answer %s", l)
	}
}

func TestParseRejectsUnknownDefect(t *testing.T) {
	if _, err := Parse("snake-case,no-such-defect"); err == nil {
		t.Fatal("Parse accepted an unknown defect name")
	}
	s, err := Parse(" snake-case , late-updates")
	if err != nil || !s[SnakeCase] || !s[LateUpdates] || len(s) != 2 {
		t.Fatalf("Parse = %v, %v", s, err)
	}
}

// TestNothingServedBeforeInitializeIsAnswered sends a session/new and a
// session/cancel right behind initialize, without waiting for its answer,
// as a client that forgets the handshake does: the request gets the
// TypeScript SDK's refusal, the notification nothing, and once initialize
// is answered the same request is served.
func TestNothingServedBeforeInitializeIsAnswered(t *testing.T) {
	send, recv := conn(t, nil)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"flawed-1"}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	l := recv()
	if gjson.Get(l, "id").Int() != 2 || gjson.Get(l, "error.code").Int() != -32600 ||
		gjson.Get(l, "error.message").String() != "Invalid request: ACP connection must be initialized before 'session/new'" {
		t.Fatalf("first answer %s, want session/new refused as the SDK refuses it", l)
	}
	if l := recv(); gjson.Get(l, "id").Int() != 1 || !gjson.Get(l, "result.protocolVersion").Exists() {
		t.Fatalf("second answer %s, want the initialize result (and nothing for the notification)", l)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if l := recv(); gjson.Get(l, "result.sessionId").String() != "flawed-1" {
		t.Fatalf("session/new after initialize: %s", l)
	}
}
