package bridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/tidwall/gjson"
)

func rec(kind, body string) store.Record {
	return store.Record{Kind: kind, Body: json.RawMessage(body)}
}

// A replay sends prompts as user_message_chunk and the history the editor
// was sent as it came (a tool call, then its updates), says which payloads
// the store omitted, and leaves out updates that describe state rather
// than history.
func TestReplay_UserChunksHistoryInOrderOmittedPayloads(t *testing.T) {
	records := []store.Record{
		rec(store.KindPrompt, `{"sessionId":"s","prompt":[{"type":"text","text":"fix it"},{"type":"image","mimeType":"image/png","data":"acp-bridge:omitted:900000"}]}`),
		rec(store.KindUpdate, `{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a.go","status":"pending"}}`),
		rec(store.KindUpdate, `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"reading"}}}`),
		rec(store.KindUpdate, `{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}`),
		rec(store.KindUpdate, `{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"package a"}}]}}`),
		rec(store.KindUpdate, `{"sessionId":"other","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"acp-bridge:omitted:5"}}}`),
		rec(store.KindUpdate, `{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}`),
		rec(store.KindStop, `{"stopReason":"end_turn"}`),
	}
	var got []string
	for _, r := range records {
		for _, p := range replayRecord("s", r) {
			if !json.Valid(p) || gjson.GetBytes(p, "sessionId").Str != "s" {
				t.Fatalf("bad params %s", p)
			}
			u := gjson.GetBytes(p, "update")
			got = append(got, u.Get("sessionUpdate").Str+"|"+u.Get("content.text").Str+u.Get("title").Str+"|"+u.Get("status").Str)
		}
	}
	want := []string{
		"user_message_chunk|fix it|",
		"user_message_chunk|[image omitted from the session transcript: 900000 bytes of image/png]|",
		"tool_call|Read a.go|pending",
		"agent_message_chunk|reading|",
		"tool_call_update||completed",
		"agent_message_chunk|[image omitted from the session transcript: 5 bytes of image/png]|",
		"plan||",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("replay:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The preamble leaves out the prompt being sent now and keeps the tail of a
// long history.
func TestPreamble_TailAndCurrentPromptLeftOut(t *testing.T) {
	tr := &store.Transcript{Records: []store.Record{
		rec(store.KindPrompt, `{"prompt":[{"type":"text","text":"first question"}]}`),
		rec(store.KindUpdate, `{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+strings.Repeat("x", 500)+`"}}}`),
		rec(store.KindUpdate, `{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"the end"}}}`),
		{Kind: store.KindSwitch, Agent: "b"},
		rec(store.KindPrompt, `{"prompt":[{"type":"text","text":"now"}]}`),
	}}
	p := preambleOf(tr.Records, 200)
	if !strings.HasPrefix(p, "[acp-bridge]") || !strings.Contains(p, "the end") || !strings.Contains(p, "moved to agent b") {
		t.Fatalf("preamble %q", p)
	}
	if strings.Contains(p, "first question") || strings.Contains(p, "now") {
		t.Fatalf("preamble kept the head of a long history or the current prompt: %q", p)
	}
	if preambleOf(tr.Records[4:], 0) != "" {
		t.Fatal("a transcript with only the current prompt has a preamble")
	}
}

// advertise adds the bridge's session capabilities and keeps the agent's.
func TestAdvertise_KeepsAgentsCapabilities(t *testing.T) {
	out := advertise(json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"promptCapabilities":{"image":true},"sessionCapabilities":{"fork":{},"_meta":{"x":1}}},"x":2}`))
	c := gjson.GetBytes(out, "agentCapabilities")
	if !c.Get("loadSession").Bool() || !c.Get("promptCapabilities.image").Bool() || gjson.GetBytes(out, "x").Int() != 2 {
		t.Fatalf("advertise = %s", out)
	}
	for _, k := range []string{"list", "resume", "close", "delete", "fork", "_meta"} {
		if !c.Get("sessionCapabilities." + k).IsObject() {
			t.Errorf("sessionCapabilities.%s missing in %s", k, out)
		}
	}
}

// preambleOf is the preamble of records, built as readHistory builds it.
func preambleOf(records []store.Record, max int) string {
	p := newPreambleBuilder(max)
	for _, r := range records {
		p.add(r)
	}
	return p.text()
}
