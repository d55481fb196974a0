package acp_test

import (
	"bytes"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// passerFrames are session/update notifications of session s1, compliant
// or not, that the engine may be tempted to pass on without the shim.
var passerFrames = []string{
	// The compact form scanUpdate reads whole (Envelope.Plain), which the
	// filter passes without looking at the content again.
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"a\"b\\n\u00e9 é"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":""}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"text":"hi","type":"text"}}}}`,
	// Read as Plain too, but of kinds that take no content.
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"future_kind","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":"bare"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":1}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{"type":"text","text":"hi"},"sessionUpdate":"user_message_chunk"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read","kind":"read","status":"pending"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"bogus"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"usage_update","used":null,"size":10}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"_meta":{"k":1}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"future_kind"}}}`,
	`{"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"session_id":"s1","update":{"session_update":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\u0031","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
}

// Whenever the shim says it passes a session's updates and its filter
// takes a frame, the shim's answer to that frame is exactly the frame,
// forwarded: what the engine's fast path writes without asking it.
func TestUpdatePasser_PassesWhatItSaysItDoes(t *testing.T) {
	type state struct {
		name   string
		setup  func(translate.Translator)
		passes bool
	}
	prompt := func(tr translate.Translator) {
		tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "session/prompt", Body: []byte(`{"sessionId":"s1","prompt":[]}`)})
	}
	states := []state{
		{"no turn", func(translate.Translator) {}, false},
		{"turn running", prompt, true},
		{"turn cancelled", func(tr translate.Translator) {
			prompt(tr)
			tr.FromEditor(translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: []byte(`{"sessionId":"s1"}`)})
		}, false},
		{"turn answered", func(tr translate.Translator) {
			prompt(tr)
			tr.FromAgent([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`))
		}, false},
		{"loading", func(tr translate.Translator) {
			tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "session/load", Body: []byte(`{"sessionId":"s1"}`)})
		}, false},
	}
	passedAny, passedPlain := 0, 0
	for _, st := range states {
		for _, f := range passerFrames {
			sh := acp.NewShim(acp.ShimOptions{})
			st.setup(sh)
			p := translate.Translator(sh).(translate.UpdatePasser)
			if got := p.PassesUpdates("s1"); got != st.passes {
				t.Fatalf("%s: PassesUpdates = %v, want %v", st.name, got, st.passes)
			}
			env, perr := translate.ParseEnvelope([]byte(f))
			if perr != nil || !p.UpdateFilter()([]byte(f), &env) || !p.PassesUpdates("s1") {
				continue
			}
			passedAny++
			if env.Plain {
				passedPlain++
			}
			outs, err := sh.FromAgent([]byte(f))
			if err != nil || len(outs) != 1 || outs[0].Kind != translate.Forward || !bytes.Equal(outs[0].Body, []byte(f)) {
				t.Errorf("%s: the filter passes %s, but the shim returns %+v, %v", st.name, f, outs, err)
			}
		}
	}
	if passedPlain < 3 {
		t.Errorf("the filter passed %d frames read as Plain, want 3", passedPlain)
	}
	if passedAny < 7 {
		t.Errorf("the filter passed %d frames, want the 7 compliant ones", passedAny)
	}
}

// The relay passes every routable ACP update, whatever its state.
func TestUpdatePasser_Relay(t *testing.T) {
	for _, f := range passerFrames {
		r := acp.New()
		env, perr := translate.ParseEnvelope([]byte(f))
		if perr != nil || !r.UpdateFilter()([]byte(f), &env) {
			continue
		}
		outs, err := r.FromAgent([]byte(f))
		if err != nil || len(outs) != 1 || outs[0].Kind != translate.Forward || !bytes.Equal(outs[0].Body, []byte(f)) {
			t.Errorf("the filter passes %s, but the relay returns %+v, %v", f, outs, err)
		}
	}
}
