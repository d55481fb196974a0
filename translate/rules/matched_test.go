package rules

import (
	"slices"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// Every kind of rule that can take an agent frame names itself to the
// engine (translate.RuleReporter), which puts the name in traces: the
// connect block's expect, a request's reply, the heartbeat's reply, an
// event, an error block, the cancel block's ack; a frame no rule took, or
// a late frame of an ended turn, names none.
func TestMatchedRule_EveryKind(t *testing.T) {
	type step struct {
		editor *translate.Msg // else the agent frame
		frame  string
		rule   string
	}
	req := func(ref translate.Ref, method, body string) step {
		return step{editor: &translate.Msg{Kind: translate.Request, Ref: ref, Method: method, Body: []byte(body)}}
	}
	run := func(t *testing.T, p *Profile, steps []step) {
		t.Helper()
		newTr, diags := p.Dialect().Configure(nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		tr := newTr()
		var got, want []string
		for _, s := range steps {
			if s.editor != nil {
				if _, err := tr.FromEditor(*s.editor); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := tr.FromAgent([]byte(s.frame)); err != nil {
				t.Fatal(err)
			}
			got = append(got, tr.(translate.RuleReporter).MatchedRule())
			want = append(want, s.rule)
		}
		if !slices.Equal(got, want) {
			t.Errorf("rules named\n got %q\nwant %q", got, want)
		}
	}

	t.Run("mini-agent-ws", func(t *testing.T) {
		run(t, shipped(t, "mini-agent-ws"), []step{
			req(1, "initialize", `{"protocolVersion":1}`),
			{editor: &translate.Msg{Kind: translate.LinkUp}},
			{frame: `{"type":"connection_established","clientId":"c1"}`, rule: "connect.expect"},
			{frame: `{"id":"x","type":"initialize_response","data":{}}`, rule: "reply initialize"},
			req(2, "session/new", `{"cwd":"/w","mcpServers":[]}`),
			{frame: `{"id":"y","type":"new_session_response","session_id":"sid-1","data":{"sessionId":"sid-1"}}`, rule: "reply session/new"},
			req(3, "session/prompt", `{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}`),
			{frame: `{"type":"status_update","sessionId":"sid-1","status":"processing"}`, rule: "status"},
			{frame: `{"id":"9f","type":"heartbeat_response","data":{}}`, rule: "heartbeat.reply"},
			{frame: `{"type":"what"}`, rule: ""},
			{frame: `{"type":"error","error":"boom"}`, rule: "error"},
		})
	})
	t.Run("turn-scope", func(t *testing.T) {
		p, diags := Parse("chatwire.hcl", []byte(turnScope))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		run(t, p, []step{
			req(1, "initialize", `{"protocolVersion":1}`),
			req(2, "session/new", `{"cwd":"/w","mcpServers":[]}`),
			req(3, "session/prompt", `{"sessionId":"session-1","prompt":[{"type":"text","text":"slow"}]}`),
			{frame: `{"type":"delta","chat_id":"session-1-1","text":"working"}`, rule: "delta"},
			{editor: &translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: []byte(`{"sessionId":"session-1"}`)}},
			{frame: `{"type":"stopped","chat_id":"session-1-1"}`, rule: "cancel.ack"},
			{frame: `{"type":"final","chat_id":"session-1-1"}`, rule: ""}, // a late frame, dropped
		})
	})
}
