package acpv2

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// BenchmarkV1RelayNegotiated is the v1 relay's cost per streamed update
// behind the Negotiator, against the relay alone: what negotiation adds to
// the v1 hot path once the agent answered 1.
func BenchmarkV1RelayNegotiated(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}`)
	run := func(b *testing.B, tr translate.Translator) {
		et := tr.(translate.EnvelopeTranslator)
		b.ReportAllocs()
		for b.Loop() {
			env, perr := translate.ParseEnvelope(frame)
			if _, err := et.FromAgentEnvelope(frame, &env, perr); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("relay", func(b *testing.B) { run(b, acp.New()) })
	b.Run("negotiated", func(b *testing.B) {
		n := NewNegotiator(0, func() translate.Translator { return acp.New() })
		n.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: []byte(`{"protocolVersion":1}`)})
		if outs, _ := n.FromAgent([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)); len(outs) != 1 || n.AgentProtocol() != 1 {
			b.Fatalf("negotiation: %v, version %d", outs, n.AgentProtocol())
		}
		run(b, n)
	})
}
