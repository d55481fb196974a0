package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/hcl/v2"
	"github.com/tidwall/gjson"
)

// oneShot is a toy per-session dialect: each link holds one conversation.
// Frames to the agent are {"op":…}; the agent ends a turn with {"op":"done"}.
type oneShot struct {
	prompt translate.Ref
	sid    string
}

func (o *oneShot) FromEditor(m translate.Msg) ([]translate.Out, error) {
	op := func(s string) translate.Out {
		return translate.Out{Kind: translate.Frame, Body: json.RawMessage(`{"op":"` + s + `"}`)}
	}
	switch m.Method {
	case "initialize":
		return []translate.Out{op("init"), {Kind: translate.Reply, Ref: m.Ref, Body: json.RawMessage(`{"protocolVersion":1}`)}}, nil
	case "session/new":
		o.sid = m.Session
		return []translate.Out{op("new"), {Kind: translate.Reply, Ref: m.Ref, Body: json.RawMessage(`{"sessionId":"` + m.Session + `"}`)}}, nil
	case "session/prompt":
		o.prompt = m.Ref
		return []translate.Out{op("prompt")}, nil
	case "session/close":
		return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: json.RawMessage(`{}`)}}, nil
	case "session/cancel":
		return []translate.Out{op("cancel")}, nil
	}
	if m.Kind == translate.Request {
		return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: translate.Errorf(-32601, "no").JSON()}}, nil
	}
	return nil, nil
}

func (o *oneShot) FromAgent(f []byte) ([]translate.Out, error) {
	if gjson.GetBytes(f, "op").Str == "done" {
		return []translate.Out{
			{Kind: translate.Notify, Method: "session/update", Body: json.RawMessage(`{"sessionId":"` + o.sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"bye"}}}`)},
			{Kind: translate.Reply, Ref: o.prompt, Body: json.RawMessage(`{"stopReason":"end_turn"}`)},
		}, nil
	}
	return nil, errors.New("unknown frame")
}

type dialed struct {
	spawn bridge.Spawn
	link  *memLink
}

func TestPerSession_OneLinkPerSession(t *testing.T) {
	before := countGoroutines()
	dials := make(chan dialed, 8)
	b := &bridge.Bridge{
		Dialect:       translate.Dialect{Name: "one-shot", PerSession: true},
		NewTranslator: func() translate.Translator { return &oneShot{} },
		Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
			l := newMemLink()
			dials <- dialed{s, l}
			return l, nil
		},
	}
	b.Dialect.Configure = func(hcl.Body) (func() translate.Translator, hcl.Diagnostics) { return b.NewTranslator, nil }
	h := serve(t, b)
	next := func() dialed {
		t.Helper()
		select {
		case d := <-dials:
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("no link dialed")
		}
		return dialed{}
	}
	expectOps := func(l *memLink, ops ...string) {
		t.Helper()
		for _, op := range ops {
			select {
			case f := <-l.toAgent:
				if got := gjson.GetBytes(f, "op").Str; got != op {
					t.Fatalf("agent got op %q, want %q", got, op)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("agent did not get op %q", op)
			}
		}
	}

	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	control := next()
	if control.spawn.Cwd != "" || control.spawn.Session != "" {
		t.Errorf("control link spawn = %+v, want zero", control.spawn)
	}
	expectOps(control.link, "init")
	h.recv()

	var sids []string
	var links []*memLink
	for i, cwd := range []string{"/a", "/b"} {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, i+1, cwd))
		d := next()
		if d.spawn.Cwd != cwd || !strings.HasPrefix(d.spawn.Session, "sess-") {
			t.Errorf("session link spawn = %+v", d.spawn)
		}
		expectOps(d.link, "init", "new") // the editor's initialize is replayed first
		got := h.recv()
		if sid := gjson.Get(got, "result.sessionId").Str; sid != d.spawn.Session {
			t.Fatalf("session/new answer %s, spawn %+v", got, d.spawn)
		}
		sids = append(sids, d.spawn.Session)
		links = append(links, d.link)
	}
	if sids[0] == sids[1] {
		t.Fatal("two sessions got one id")
	}

	// Prompts go to their own session's link.
	h.send(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"` + sids[1] + `","prompt":[]}}`)
	expectOps(links[1], "prompt")
	h.send(`{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":"` + sids[0] + `","prompt":[]}}`)
	expectOps(links[0], "prompt")
	links[0].fromAgent <- []byte(`{"op":"done"}`)
	if got := h.recv(); gjson.Get(got, "params.sessionId").Str != sids[0] {
		t.Errorf("update = %s", got)
	}
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":11,"result":{"stopReason":"end_turn"}}` {
		t.Errorf("answer = %s", got)
	}

	// Session 1's agent dies mid-turn: its prompt fails, session 0 is fine.
	links[1].die(errors.New("agent process exited: exit status 2"))
	if got := h.recv(); gjson.Get(got, "id").Raw != "10" || !strings.Contains(got, "exit status 2") {
		t.Errorf("dead session's prompt answered %s", got)
	}
	h.send(`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":"` + sids[1] + `","prompt":[]}}`)
	if got := h.recv(); gjson.Get(got, "error.code").Int() != -32603 {
		t.Errorf("prompt to a dead session answered %s", got)
	}

	// Closing a session closes its link; the id is then unknown.
	h.send(`{"jsonrpc":"2.0","id":13,"method":"session/close","params":{"sessionId":"` + sids[0] + `"}}`)
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":13,"result":{}}` {
		t.Errorf("close answered %s", got)
	}
	select {
	case <-links[0].closed:
	case <-time.After(5 * time.Second):
		t.Error("closed session's link still open")
	}
	h.send(`{"jsonrpc":"2.0","id":14,"method":"session/prompt","params":{"sessionId":"` + sids[0] + `","prompt":[]}}`)
	if got := h.recv(); gjson.Get(got, "error.code").Int() != -32602 {
		t.Errorf("prompt to a closed session answered %s", got)
	}

	h.close()
	for _, l := range append(links, control.link) {
		select {
		case <-l.closed:
		default:
			t.Error("a link is still open after Serve returned")
		}
	}
	checkGoroutines(t, before)
}

// serve runs b over pipes without the relay harness's dialing.
// serve runs b over pipes; the test's cleanup ends the editor's input and
// checks that no goroutine outlives Serve.
func serve(t *testing.T, b *bridge.Bridge) *harness {
	before := countGoroutines()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, in: inW, out: newLineReader(outR), served: make(chan error, 1)}
	go func() {
		h.served <- b.Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	h.drain = outR
	t.Cleanup(func() {
		h.close()
		checkGoroutines(t, before)
	})
	return h
}

// failing answers every request with its own error and also reports one.
type failing struct{ oneShot }

func (f *failing) FromEditor(m translate.Msg) ([]translate.Out, error) {
	if m.Method == "_x/broken" {
		return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: translate.Errorf(-32602, "precise reason").JSON()}}, errors.New("also logged")
	}
	return f.oneShot.FromEditor(m)
}

func TestTranslatorAnswerWinsOverItsError(t *testing.T) {
	b := &bridge.Bridge{
		Dialect:       translate.Dialect{Name: "failing"},
		NewTranslator: func() translate.Translator { return &failing{} },
		Dial:          func(context.Context, bridge.Spawn) (bridge.Link, error) { return newMemLink(), nil },
	}
	h := serve(t, b)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"_x/broken","params":{}}`)
	if got := h.recv(); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, "precise reason") {
		t.Errorf("answer = %s, want the translator's own error", got)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"method":"_x/next","params":{}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "2" {
		t.Errorf("next line = %s; the request was answered twice", got)
	}
	h.close()
}

// A session one connection of a process has open, asked for by another
// connection of the same process (two editors of acp-bridge serve, which
// share one store), is refused with a message that says so: not "another
// acp-bridge process" naming the very process that answers.
func TestDurable_BusyInThisProcessSaysSo(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	one := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
	one.initializePlain()
	sid := one.newSession("1")
	two := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
	two.initializePlain()
	two.send(`{"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId":"` + sid + `","cwd":"/tmp","mcpServers":[]}}`)
	got := two.recv()
	msg := gjson.Get(got, "error.message").Str
	if !strings.Contains(msg, fmt.Sprintf("this acp-bridge process (pid %d)", os.Getpid())) || strings.Contains(msg, "another acp-bridge process") {
		t.Errorf("a load of a session another connection of this process holds = %s", got)
	}
}
