package bridge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/tidwall/gjson"
)

func promptLine(id, sid string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`
}

// A second prompt on a session whose turn runs is rejected at once, with a
// code ACP does not reserve and a message that says what to do; it never
// reaches the agent. After the first turn's (cancelled) answer, a prompt is
// accepted again.
func TestOneTurn_SecondPromptRejected(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(promptLine("2", sid))
	first := h.agentRecv()
	h.send(promptLine("3", sid))
	got := h.recv()
	code := gjson.Get(got, "error.code").Int()
	if gjson.Get(got, "id").Raw != "3" || code != -32600 || !strings.Contains(gjson.Get(got, "error.message").Str, "wait for its answer") {
		t.Fatalf("second prompt answered %s", got)
	}
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if c := h.agentRecv(); gjson.Get(c, "method").Str != "session/cancel" {
		t.Fatalf("agent got %s, want the cancel (the rejected prompt must not reach it)", c)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(first, "id").Raw + `,"result":{"stopReason":"cancelled"}}`)
	if got := h.recv(); gjson.Get(got, "result.stopReason").Str != "cancelled" {
		t.Fatalf("first prompt answered %s", got)
	}
	h.send(promptLine("4", sid))
	if req := h.agentRecv(); gjson.Get(req, "method").Str != "session/prompt" {
		t.Fatalf("prompt after the cancelled answer: agent got %s", req)
	}
}

// In queue mode the second prompt waits for the first turn's answer, then
// goes to the agent; a session/cancel answers queued prompts "cancelled".
func TestOneTurn_Queue(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.OneTurn = bridge.OneTurnQueue })
	h.initialize()
	sid := h.newSession("1")
	h.send(promptLine("2", sid))
	first := h.agentRecv()
	h.send(promptLine("3", sid))
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(first, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "2" {
		t.Fatalf("got %s, want the first prompt's answer", got)
	}
	second := h.agentRecv()
	if gjson.Get(second, "method").Str != "session/prompt" {
		t.Fatalf("agent got %s, want the queued prompt", second)
	}
	h.send(promptLine("4", sid))
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "4" || gjson.Get(got, "result.stopReason").Str != "cancelled" {
		t.Fatalf("queued prompt after cancel: %s", got)
	}
	h.agentRecv() // the cancel
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(second, "id").Raw + `,"result":{"stopReason":"cancelled"}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "3" {
		t.Fatalf("got %s, want the second prompt's answer", got)
	}
}

// An agent that says it queues prompts itself (claude-agent-acp's
// _meta.claudeCode.promptQueueing) gets the second prompt: the bridge is
// no stricter than what it fronts.
func TestOneTurn_AgentThatQueuesGetsTheSecondPrompt(t *testing.T) {
	for _, where := range []string{`"_meta":{"claudeCode":{"promptQueueing":true}}`, `"agentCapabilities":{"_meta":{"claudeCode":{"promptQueueing":true}}}`} {
		h := newHarness(t, nil)
		h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
		init := h.agentRecv()
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(init, "id").Raw + `,"result":{"protocolVersion":1,` + where + `}}`)
		h.recv()
		sid := h.newSession("1")
		h.send(promptLine("2", sid))
		h.agentRecv()
		h.send(promptLine("3", sid))
		if second := h.agentRecv(); gjson.Get(second, "method").Str != "session/prompt" || gjson.Get(second, "params.sessionId").Str != sid {
			t.Fatalf("%s: the agent got %s, want the second prompt", where, second)
		}
		h.close()
	}
}

// initializeQueueing performs the handshake with an agent that queues
// prompts itself (claude-agent-acp's promptQueueing).
func (h *harness) initializeQueueing() {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	init := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(init, "id").Raw + `,"result":{"protocolVersion":1,"agentCapabilities":{"_meta":{"claudeCode":{"promptQueueing":true}}}}}`)
	h.recv()
}

// When the cancel grace of one prompt runs out while a later prompt of the
// session is open and was not cancelled (an agent that queues prompts), the
// bridge answers the cancelled one itself but keeps the open turn's
// updates: they may be that turn's, and dropping them loses its text.
func TestOneTurn_CancelGraceKeepsAnOpenTurnsUpdates(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.CancelGrace = 50 * time.Millisecond })
	h.initializeQueueing()
	sid := h.newSession("1")
	h.send(promptLine("2", sid))
	h.agentRecv()
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	h.agentRecv()
	h.send(promptLine("3", sid))
	second := h.agentRecv()
	if got := h.recv(); gjson.Get(got, "id").Raw != "2" || gjson.Get(got, "result.stopReason").Str != "cancelled" {
		t.Fatalf("got %s, want the cancelled prompt answered by the grace period", got)
	}
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"queued turn"}}}}`)
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(second, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "queued turn" {
		t.Fatalf("got %s, want the open turn's update", got)
	}
	if got := h.recv(); gjson.Get(got, "id").Raw != "3" || gjson.Get(got, "result.stopReason").Str != "end_turn" {
		t.Fatalf("got %s, want the second prompt's answer", got)
	}
}

// Turns an agent queues are recorded in the order of their prompts: a load
// replays each prompt with its own turn's text, never a later prompt in the
// middle of an earlier turn, whichever turn the agent answers first.
func TestOneTurn_QueuedTurnsRecordedInPromptOrder(t *testing.T) {
	for _, secondFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("second answered first %v", secondFirst), func(t *testing.T) {
			st, err := store.Open(store.Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			h := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
			h.initializeQueueing()
			sid := h.newSession("1")
			prompt := func(id, text string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"` + text + `"}]}}`
			}
			chunk := func(text string) string {
				return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
			}
			answer := func(req, reason string) string {
				return `{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"` + reason + `"}}`
			}
			h.send(prompt("2", "first"))
			p1 := h.agentRecv()
			h.send(prompt("3", "second"))
			p2 := h.agentRecv()
			want := []string{"user:first", "agent:a1", "user:second"}
			if secondFirst {
				h.agentSend(answer(p2, "cancelled"))
				if got := h.recv(); gjson.Get(got, "id").Raw != "3" {
					t.Fatalf("got %s, want the second prompt's answer", got)
				}
			}
			h.agentSend(chunk("a1"))
			h.agentSend(answer(p1, "end_turn"))
			if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "a1" {
				t.Fatalf("got %s, want the first turn's text", got)
			}
			if got := h.recv(); gjson.Get(got, "id").Raw != "2" {
				t.Fatalf("got %s, want the first prompt's answer", got)
			}
			if !secondFirst {
				h.agentSend(chunk("b1"))
				h.agentSend(answer(p2, "end_turn"))
				h.recv()
				if got := h.recv(); gjson.Get(got, "id").Raw != "3" {
					t.Fatalf("got %s, want the second prompt's answer", got)
				}
				want = append(want, "agent:b1")
			}
			h.send(`{"jsonrpc":"2.0","id":20,"method":"session/load","params":{"sessionId":"` + sid + `","cwd":"/tmp","mcpServers":[]}}`)
			var got []string
			for {
				m := h.recv()
				if gjson.Get(m, "id").Raw == "20" {
					break
				}
				switch gjson.Get(m, "params.update.sessionUpdate").Str {
				case "user_message_chunk":
					got = append(got, "user:"+gjson.Get(m, "params.update.content.text").Str)
				case "agent_message_chunk":
					got = append(got, "agent:"+gjson.Get(m, "params.update.content.text").Str)
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("a load replays %q, want %q", got, want)
			}
		})
	}
}
