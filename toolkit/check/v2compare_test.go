package check

import (
	"slices"
	"testing"
)

func transcript(lines ...string) []Msg {
	var out []Msg
	for i, l := range lines {
		m := newMsg([]byte(l))
		m.N = i
		out = append(out, m)
	}
	return out
}

// One turn streamed the v1 way and upserted the v2 way reduces to the same
// outcome; in v2 an omitted field leaves a tool call's state, null clears
// it, and a whole-message upsert replaces the streamed text.
func TestOutcomeOf_V1AndV2Agree(t *testing.T) {
	v1 := transcript(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"a","title":"Edit x","kind":"edit","status":"pending"}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"a"},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"a","status":"completed"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"look","priority":"high","status":"completed"}]}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
	)
	v2 := transcript(
		`{"jsonrpc":"2.0","id":3,"result":{"messageId":"u"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"running"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"He"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message","messageId":"m","content":[{"type":"text","text":"Hello"}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"b","title":"Edit x","kind":"edit","status":"pending","locations":[]}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","title":"Edit x?","subject":{"type":"tool_call","toolCall":{"toolCallId":"b"}},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"b","status":"completed"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"old","priority":"low","status":"pending"}]}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"look","priority":"high","status":"completed"}]}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`,
	)
	a := outcomeOf(v1, "s", 6, map[string]string{}, true)
	b := outcomeOf(v2, "s", 9, map[string]string{}, true)
	want := []string{
		`message "Hello"`,
		"permission tc1 options=allow_once",
		`tool tc1 kind=edit status=completed title="Edit x"`,
		"plan [completed] look",
	}
	if !slices.Equal(a, want) {
		t.Errorf("v1 outcome %q, want %q", a, want)
	}
	if !slices.Equal(b, want) {
		t.Errorf("v2 outcome %q, want %q", b, want)
	}

	cleared := outcomeOf(transcript(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","title":"Run","kind":"execute","status":"in_progress"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","title":null}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[]}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan_update","plan":null}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"late","content":{"type":"text","text":"x"}}}}`,
	), "s", 4, map[string]string{}, false)
	want = []string{"message", `tool tc1 kind=execute status=in_progress title=""`, "1 update(s) after the turn ended"}
	if !slices.Equal(cleared, want) {
		t.Errorf("null-cleared outcome %q, want %q", cleared, want)
	}
}
