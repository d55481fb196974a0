package fakeagent

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestNothingServedBeforeInitializeIsAnswered sends a notification and
// requests right behind initialize, without waiting for its answer, as a
// client that forgets the handshake does: each request gets the TypeScript
// SDK's refusal, the notification is dropped, and once initialize is
// answered the same requests are served.
func TestNothingServedBeforeInitializeIsAnswered(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(inR, outW, Options{Transport: "test"}); outW.Close() }()
	t.Cleanup(func() { inW.Close(); <-done })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	recv := func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line from the agent within 10s")
			return ""
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"_test/info"}`)
	for _, want := range []struct {
		id     int64
		method string
	}{{2, "session/new"}, {3, "_test/info"}} {
		l := recv()
		if gjson.Get(l, "id").Int() != want.id || gjson.Get(l, "error.code").Int() != -32600 ||
			gjson.Get(l, "error.message").String() != "Invalid request: ACP connection must be initialized before '"+want.method+"'" {
			t.Fatalf("answer %s, want %s refused as the SDK refuses it", l, want.method)
		}
	}
	if l := recv(); gjson.Get(l, "id").Int() != 1 || gjson.Get(l, "result.protocolVersion").Int() != 1 {
		t.Fatalf("answer %s, want the initialize result", l)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if l := recv(); gjson.Get(l, "result.sessionId").String() != "sess-1" {
		t.Fatalf("session/new after initialize: %s", l)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"_test/journal"}`)
	l := recv()
	var events []string
	for _, e := range gjson.Get(l, "result.events").Array() {
		events = append(events, e.Str)
	}
	want := []string{"dropped-before-initialize:session/cancel", "refused-before-initialize:session/new", "refused-before-initialize:_test/info", "session:sess-1:cwd=/tmp"}
	if len(events) != len(want) {
		t.Fatalf("journal events %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("journal events %q, want %q", events, want)
		}
	}
}
