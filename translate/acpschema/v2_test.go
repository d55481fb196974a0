package acpschema

import (
	"strings"
	"testing"
)

// The v2 validator knows v2's types and rejects v1's shapes where v2
// changed them.
func TestSchemaV2_NamesTheFailingField(t *testing.T) {
	s, err := LoadSchemaV2()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		def, msg string
		want     string // "" = valid
	}{
		{s.ResultDef("session/prompt"), `{"messageId":"m1"}`, ""},
		{s.ResultDef("session/prompt"), `{"stopReason":"end_turn"}`, "messageId: required field missing"},
		{s.ResultDef("initialize"), `{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{"prompt":{"image":{}}}}}`, ""},
		{s.ResultDef("initialize"), `{"protocolVersion":2,"agentInfo":{"name":"a","version":"1"}}`, "info: required field missing"},
		{s.NotificationDef("session/update"), `{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}`, ""},
		{s.NotificationDef("session/update"), `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"hi"}}}`, ""},
		{s.NotificationDef("session/update"), `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, "messageId: required field missing"},
		// Open enums: an unknown update kind is valid in v2.
		{s.NotificationDef("session/update"), `{"sessionId":"s","update":{"sessionUpdate":"_vendor_update","x":1}}`, ""},
		{s.RequestDef("session/request_permission"), `{"sessionId":"s","title":"Run?","options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}`, ""},
		{s.RequestDef("session/request_permission"), `{"sessionId":"s","toolCall":{"toolCallId":"t","title":"x"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}`, "title: required field missing"},
		{s.RequestDef("fs/read_text_file"), `{}`, "the schema has no type"},
	} {
		got := strings.Join(s.Validate(c.def, []byte(c.msg)), "; ")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s %s:\n got %q\nwant %q", c.def, c.msg, got, c.want)
		}
	}
}
