package acpschema

import (
	"strings"
	"testing"
)

func TestSchema_NamesTheFailingField(t *testing.T) {
	s, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		def, msg string
		want     string // "" = valid
	}{
		{"SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, ""},
		{"SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":"hi"}}`, "update.content: want object, got string"},
		{"SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"subagent_update"}}`, `update.sessionUpdate: "subagent_update" is not one of`},
		{"SessionNotification", `{"session_id":"s","update":{"sessionUpdate":"plan","entries":[]}}`, "sessionId: required field missing"},
		{"PromptResponse", `{"stopReason":"end_turn"}`, ""},
		{"PromptResponse", `{"stopReason":"canceled"}`, `stopReason: "canceled" is not one of`},
		{s.ResultDef("initialize"), `{"protocolVersion":1,"agentCapabilities":{}}`, ""},
		{s.ResultDef("initialize"), `{"protocolVersion":"1"}`, "protocolVersion: want integer, got string"},
		{s.RequestDef("fs/read_text_file"), `{"sessionId":"s","path":"/a"}`, ""},
		{s.NotificationDef("$/cancel_request"), `{"requestId":3}`, ""},
		{s.NotificationDef("$/cancel_request"), `{"requestId":1.5}`, "requestId: want null or integer or string"},
		{s.ResultDef("session/set_mode"), `null`, "want object, got null"},
	} {
		got := strings.Join(s.Validate(c.def, []byte(c.msg)), "; ")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s %s:\n got %q\nwant %q", c.def, c.msg, got, c.want)
		}
	}
}
