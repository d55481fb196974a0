package bridge

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// plainUpdate finds a Plain chunk's update member by arithmetic: it is
// exactly what a JSON reader finds as params.update, whatever the id.
func TestPlainUpdateIsTheUpdateMember(t *testing.T) {
	for _, sid := range []string{"s1", "", "sess-0f3a", "é<&>", "a b/c", "0123456789012345678901234567890123456789"} {
		for _, kind := range []string{"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "other"} {
			frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"` + kind + `","content":{"type":"text","text":"x\"y"}}}}`)
			var p translate.Parser
			var env translate.Envelope
			for range 2 { // the long way, then by the opening kept
				if err := p.ParseInto(&env, frame); err != nil || !env.Plain {
					t.Fatalf("%s: not read as Plain: %v", frame, err)
				}
				if got, want := string(plainUpdate(&env)), gjson.GetBytes(frame, "params.update").Raw; got != want {
					t.Fatalf("%s: plainUpdate = %s, want %s", frame, got, want)
				}
			}
		}
	}
}
