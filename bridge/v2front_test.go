package bridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv2"
	"github.com/tidwall/gjson"
)

// The editor's first initialize picks the version spoken to it, as the
// SDK's protocol router does for an agent of both versions: the version
// asked for when the bridge speaks it, its latest (2) above, v2's -32022
// below (after which the editor tries again); non-numbers keep v1.
// --editor-protocol forces it either way. The agent is always asked for 1.
func TestEditorProtocol_Negotiation(t *testing.T) {
	for _, c := range []struct {
		asked  string
		forced int
		want   string
	}{
		{`1`, 0, "1"},
		{`2`, 0, "2"},
		{`3`, 0, "2"},
		{`0`, 0, "-32022"},
		{`"0.0.9"`, 0, "1"},
		{`1.5`, 0, "1"},
		{`2`, 1, "1"},
		{`1`, 2, "2"},
	} {
		t.Run(fmt.Sprintf("asked %s forced %d", c.asked, c.forced), func(t *testing.T) {
			h := newHarness(t, func(b *bridge.Bridge) { b.EditorProtocol = c.forced })
			h.send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":` + c.asked + `,"info":{"name":"e","version":"1"}}}`)
			if c.want == "-32022" {
				// v2's answer to a version below any the bridge
				// speaks; the agent is not asked, and the editor may
				// try again.
				got := h.recv()
				if gjson.Get(got, "id").Raw != `"i"` || gjson.Get(got, "error.code").Int() != -32022 ||
					gjson.Get(got, "error.data.requested").Raw != c.asked || gjson.Get(got, "error.data.supported").Raw != "[1,2]" {
					t.Errorf("answer %s, want -32022 with UnsupportedProtocolVersionErrorData", got)
				}
				h.send(`{"jsonrpc":"2.0","id":"j","method":"initialize","params":{"protocolVersion":1}}`)
				c.want = "1"
			}
			req := h.agentRecv()
			if v := gjson.Get(req, "params.protocolVersion").Raw; v != "1" {
				t.Errorf("agent asked for version %s, want 1", v)
			}
			h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"}}}`)
			got := h.recv()
			if !gjson.Get(got, "id").Exists() || gjson.Get(got, "result.protocolVersion").Raw != c.want {
				t.Errorf("answer %s, want protocolVersion %s", got, c.want)
			}
			meta := gjson.Get(got, `result._meta.acp-bridge`)
			if meta.Get("editorProtocol").Raw != c.want || meta.Get("agentProtocol").Raw != "1" {
				t.Errorf(`_meta["acp-bridge"] = %s, want editorProtocol %s and agentProtocol 1`, meta.Raw, c.want)
			}
			if c.want == "2" && !gjson.Get(got, "result.info").Exists() {
				t.Errorf("a v2 answer without info: %s", got)
			}
		})
	}
}

// A v2 editor's prompt is acknowledged before the agent has answered and
// echoed under the acknowledgement's messageId, and the agent's answer
// becomes the closing state_update; the engine-hop id
// is the front's, not the editor's.
func TestEditorProtocol_V2PromptThroughEngine(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"1"}}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"}}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}`)
	req = h.agentRecv()
	if !gjson.Get(req, "params.mcpServers").IsArray() {
		t.Errorf("session/new to a v1 agent without mcpServers: %s", req)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"s"}}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`)
	ack := h.recv()
	if gjson.Get(ack, "id").Raw != "1" || gjson.Get(ack, "result.messageId").Str == "" {
		t.Fatalf("prompt acknowledgement %s", ack)
	}
	if running := h.recv(); gjson.Get(running, "params.update.state").Str != "running" {
		t.Fatalf("want running, got %s", running)
	}
	// v2 agents echo the prompt under the acknowledgement's messageId.
	if echo := gjson.Get(h.recv(), "params.update"); echo.Get("sessionUpdate").Str != "user_message" ||
		echo.Get("messageId").Str != gjson.Get(ack, "result.messageId").Str || echo.Get("content.0.text").Str != "hi" {
		t.Fatalf("want the prompt echoed as a user_message under %s, got %s", ack, echo.Raw)
	}
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"yo"}}}}`)
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if chunk := h.recv(); gjson.Get(chunk, "params.update.messageId").Str == "" {
		t.Errorf("chunk without messageId: %s", chunk)
	}
	if end := h.recv(); gjson.Get(end, "params.update.state").Str != "idle" || gjson.Get(end, "params.update.stopReason").Str != "end_turn" {
		t.Errorf("want idle end_turn, got %s", end)
	}
}

// The tap (and so --trace) records what crossed the editor hop: a v2
// editor's own messages, each once, not the front's v1 translations; and
// the v2 messages the editor was sent.
func TestEditorProtocol_TapSeesV2(t *testing.T) {
	var mu sync.Mutex
	var in, out []string
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Tap = func(ev bridge.TapEvent) {
			if ev.Hop != bridge.EditorHop {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ev.Inbound {
				in = append(in, string(ev.Message))
			} else {
				out = append(out, string(ev.Message))
			}
		}
	})
	sent := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"1"}}}`,
		// Pipelined behind initialize: held by the engine until it ends.
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}`,
	}
	for _, l := range sent {
		h.send(l)
	}
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"}}}`)
	h.recv()
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"s"}}`)
	h.recv()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(in, sent) {
		t.Errorf("tapped from the editor:\n%q\nwant what it sent:\n%q", in, sent)
	}
	if len(out) != 2 || gjson.Get(out[0], "result.protocolVersion").Raw != "2" || gjson.Get(out[1], "result.sessionId").Str != "s" {
		t.Errorf("tapped to the editor: %q", out)
	}
}

// A v2 editor has no client file system or terminals, unless it announces
// v1's under capabilities._meta["acp-bridge"] (as acp-bridge does in front
// of a v1 editor). The engine serves a v1 agent's fs calls from disk for
// the first, whatever v1 members ride beside v2's in its initialize (the
// Front says what the editor serves), and refuses its terminal calls, each
// request on its own; the second gets both, as v2 extension methods.
func TestEditorProtocol_V2ClientMethods(t *testing.T) {
	v1Beside := `"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}`
	marker := `"capabilities":{"_meta":{"acp-bridge":{"v1ClientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}}`
	for _, c := range []struct {
		name, params string
		relayed      bool
	}{
		{"plain v2", `"capabilities":{}`, false},
		{"v1 members beside", `"capabilities":{},` + v1Beside, false},
		{"announced under _meta", marker + `,` + v1Beside, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(b *bridge.Bridge) {
				newTr, diags := acp.Dialect.Configure(nil)
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				b.NewTranslator = func() translate.Translator { return acpv2.NewNegotiator(0, newTr) }
			})
			h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"1"},` + c.params + `}}`)
			req := h.agentRecv()
			h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentCapabilities":{},"agentInfo":{"name":"a","version":"1"}}}`)
			h.recv()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("on disk"), 0o644); err != nil {
				t.Fatal(err)
			}
			h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":` + strconv.Quote(dir) + `}}`)
			req = h.agentRecv()
			h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"s"}}`)
			h.recv()
			path := strconv.Quote(filepath.Join(dir, "a.txt"))
			h.agentSend(`{"jsonrpc":"2.0","id":"r","method":"fs/read_text_file","params":{"sessionId":"s","path":` + path + `}}`)
			if c.relayed {
				call := h.recv()
				if m := gjson.Get(call, "method").Str; m != "_acp-bridge/v1/fs/read_text_file" {
					t.Fatalf("the editor got %s, want _acp-bridge/v1/fs/read_text_file", call)
				}
				h.send(`{"jsonrpc":"2.0","id":` + gjson.Get(call, "id").Raw + `,"result":{"content":"in the editor"}}`)
			}
			got := h.agentRecv()
			want := "on disk"
			if c.relayed {
				want = "in the editor"
			}
			if gjson.Get(got, "id").Raw != `"r"` || gjson.Get(got, "result.content").Str != want {
				t.Errorf("the agent's fs/read_text_file was answered %s, want content %q", got, want)
			}
			h.agentSend(`{"jsonrpc":"2.0","id":"t","method":"terminal/create","params":{"sessionId":"s","command":"make"}}`)
			if c.relayed {
				call := h.recv()
				if m := gjson.Get(call, "method").Str; m != "_acp-bridge/v1/terminal/create" {
					t.Fatalf("the editor got %s, want _acp-bridge/v1/terminal/create", call)
				}
				h.send(`{"jsonrpc":"2.0","id":` + gjson.Get(call, "id").Raw + `,"result":{"terminalId":"t-1"}}`)
			}
			got = h.agentRecv()
			switch {
			case gjson.Get(got, "id").Raw != `"t"`:
				t.Errorf("the agent's terminal/create was answered %s", got)
			case c.relayed && gjson.Get(got, "result.terminalId").Str != "t-1":
				t.Errorf("the agent's terminal/create was answered %s, want the editor's terminal", got)
			case !c.relayed && gjson.Get(got, "error.code").Int() != -32601:
				t.Errorf("the agent's terminal/create was answered %s, want -32601", got)
			}
		})
	}
}
