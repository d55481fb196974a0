package bridge_test

import (
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/tidwall/gjson"
)

// A session the editor closed is no longer active (ACP: session/close frees
// it): a prompt for it is refused, with the session named and what to do,
// and never reaches the agent nor reopens the session from the store;
// session/resume opens it again, and then it takes prompts.
func TestDurable_ClosedSessionRefusesPromptsUntilResumed(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
	h.initializePlain()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"` + sid + `"}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "2" || !gjson.Get(got, "result").IsObject() {
		t.Fatalf("session/close answered %s", got)
	}
	for _, method := range []string{"session/prompt", "session/set_mode"} {
		h.send(`{"jsonrpc":"2.0","id":"x","method":"` + method + `","params":{"sessionId":"` + sid + `","prompt":[],"modeId":"m"}}`)
		got := h.recv()
		msg := gjson.Get(got, "error.message").Str
		if gjson.Get(got, "id").Raw != `"x"` || gjson.Get(got, "error.code").Int() != -32002 ||
			!strings.Contains(msg, sid) || !strings.Contains(msg, "session/resume") || gjson.Get(got, "error.data.sessionId").Str != sid {
			t.Fatalf("%s for the closed session answered %s, want -32002 naming the session and session/resume", method, got)
		}
	}
	h.send(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"` + sid + `","cwd":"/tmp","mcpServers":[]}}`)
	open := h.agentRecv() // the agent has no resume: a new agent session
	if m := gjson.Get(open, "method").Str; m != "session/new" {
		t.Fatalf("the agent got %s, want the resume's session/new (the refused requests must not reach it)", open)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(open, "id").Raw + `,"result":{"sessionId":"again"}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "3" || gjson.Get(got, "error").Exists() {
		t.Fatalf("session/resume answered %s", got)
	}
	h.send(promptLine("4", sid))
	if p := h.agentRecv(); gjson.Get(p, "method").Str != "session/prompt" {
		t.Fatalf("after the resume the agent got %s, want the prompt", p)
	}
}
