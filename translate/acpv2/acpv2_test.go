package acpv2

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func TestTranscripts(t *testing.T) {
	translatetest.Run(t, Dialect, "testdata/*.txtar")
}

// fuzzSetup initializes the link, opens a session and leaves a prompt
// running, so fuzzed frames reach the turn's states.
const fuzzSetup = `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{}}}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"jsonrpc":"2.0","id":2,"result":{"sessionId":"s-1"}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"x"}]}}`

// FuzzFromAgent feeds arbitrary agent frames (one per line; "editor> " and
// "event> " lines are editor inputs) to a translator with a prompt running,
// and fails on a panic, invalid or multi-line JSON output, a malformed
// session/update or error object, or an answer for a request the editor
// never sent or had already had answered.
func FuzzFromAgent(f *testing.F) {
	seeds, err := translatetest.AgentLines("testdata/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) < 40 {
		f.Fatalf("only %d seeds from testdata", len(seeds))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// Sequences that reach deeper states: acknowledged, chunks then an
	// upsert, a permission answered, the turn's end twice.
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"messageId":"u"}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"a"}}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message","messageId":"m","content":[{"type":"text","text":"ab"},{"type":"text","text":"c"}]}}}
{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s-1","title":"t","options":[{"optionId":"o","name":"O","kind":"allow_once"}]}}
editor> {"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"error"}}}`))
	translatetest.FuzzAgent(f, Dialect, "", fuzzSetup)
}

// negotiating is the acp dialect as package launch composes it: the
// Negotiator in front of the v1 relay. Its options block sets force, and
// editor = 2 stands for a v2 front passing v2 frames through.
var negotiating = translate.Dialect{
	Name:  "acp (negotiating)",
	Relay: true,
	Configure: func(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		var o struct {
			Force  int `hcl:"force,optional"`
			Editor int `hcl:"editor,optional"`
		}
		if body != nil {
			if diags := hcldecode.DecodeBody(body, nil, &o); diags.HasErrors() {
				return nil, diags
			}
		}
		return func() translate.Translator {
			n := NewNegotiator(o.Force, func() translate.Translator { return acp.New() })
			if o.Editor != 0 {
				n.SetEditorProtocol(o.Editor)
			}
			return n
		}, nil
	},
}

func TestNegotiateTranscripts(t *testing.T) {
	translatetest.Run(t, negotiating, "testdata/negotiate/*.txtar")
}

// FuzzNegotiate feeds arbitrary agent frames to a link negotiating its
// version, from the initialize on: any answer (or none, or a broken one)
// must leave exactly one answer per editor request and valid output,
// whichever version the link ends up speaking.
func FuzzNegotiate(f *testing.F) {
	seeds, err := translatetest.AgentLines("testdata/negotiate/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"no","data":{"requested":2,"supported":[1]}}}
{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":1}}`))
	translatetest.FuzzAgent(f, negotiating, "", `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"e","version":"1"}}}`)
}
