package wire_test

import (
	"reflect"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/wire"
)

func chunkFrame(sid, kind, text string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"` + kind + `","content":{"type":"text","text":"` + text + `"}}}}`
}

// FuzzParserAgreesWithParseEnvelope: a Parser that has read one frame (and
// kept its opening, when it was a text chunk) reads the next exactly as
// ParseEnvelope does, into an envelope still holding the last frame's
// fields; and so again when it reads that frame a second time.
func FuzzParserAgreesWithParseEnvelope(f *testing.F) {
	a := chunkFrame("s1", "agent_message_chunk", "hello")
	for _, next := range []string{
		chunkFrame("s1", "agent_message_chunk", "more"),
		chunkFrame("s1", "agent_message_chunk", `esc\"aped\\ \u00e9 \n`),
		chunkFrame("s1", "agent_message_chunk", "bad \x01 control"),
		chunkFrame("s1", "agent_message_chunk", "bad \xc3 utf-8"),
		chunkFrame("s1", "agent_message_chunk", `unterminated\"}}}}`),
		chunkFrame("s1", "agent_thought_chunk", "other kind"),
		chunkFrame("s2", "agent_message_chunk", "other session"),
		chunkFrame("s1", "user_message_chunk", "generic kind"),
		chunkFrame("s1", "custom_kind", "unknown kind"),
		chunkFrame("s1", "agent_message_chunk", `a","x":"b`),
		chunkFrame("s1", "agent_message_chunk", "tail") + " ",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"_meta":{}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`not json`,
	} {
		f.Add([]byte(a), []byte(next))
		f.Add([]byte(next), []byte(a))
	}
	f.Fuzz(func(t *testing.T, first, next []byte) {
		var p wire.Parser
		var env wire.Envelope
		p.ParseInto(&env, first)
		for range 2 {
			err := p.ParseInto(&env, next)
			want, werr := wire.ParseEnvelope(next)
			if !reflect.DeepEqual(err, werr) {
				t.Fatalf("after %q, %q: error %v, want %v", first, next, err, werr)
			}
			if werr != nil && werr.Code == wire.CodeParseError {
				continue // the envelope of a text that is not JSON means nothing
			}
			if !reflect.DeepEqual(env, want) {
				t.Fatalf("after %q, %q:\n got %+v\nwant %+v", first, next, env, want)
			}
		}
	})
}
