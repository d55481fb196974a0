package rules

import (
	"fmt"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// relayShaped is a profile that reads the very frames the acp relay
// relays (ACP session/update notifications) and rebuilds them, so the two
// can be compared on the same bytes.
const relayShaped = `
envelope = "jsonrpc"
request "session/new" {
  method = "session/new"
  params = { cwd = session.cwd, mcpServers = [] }
  reply {
    keep = { agent_session = "result.sessionId" }
  }
}
request "session/prompt" {
  method = "session/prompt"
  params = { sessionId = session.agent_session, prompt = [{ type = "text", text = prompt.text }] }
}
event "update" {
  match   = { method = "session/update", "params.update.sessionUpdate" = "agent_message_chunk" }
  message = frame.params.update.content.text
}
`

func chunkFrame(i int) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"token %d of a streamed answer, with \"quotes\" and unicode é"}}}}`, i))
}

func zeroclawChunk(i int) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/event","params":{"session_id":"s-1","type":"chunk","content":"token %d of a streamed answer, with \"quotes\" and unicode é"}}`, i))
}

// running returns a translator of p with a prompt running in session s-1.
func running(b *testing.B, p *Profile, newSession, sessionReply string) translate.Translator {
	newTr, diags := p.Dialect().Configure(nil)
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	tr := newTr()
	must := func(outs []translate.Out, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: []byte(`{"protocolVersion":1}`)}))
	must(tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 2, Method: "session/new", Body: []byte(newSession)}))
	must(tr.FromAgent([]byte(sessionReply)))
	must(tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 3, Method: "session/prompt", Body: []byte(`{"sessionId":"s-1","prompt":[{"type":"text","text":"go"}]}`)}))
	return tr
}

// BenchmarkChunks measures streamed chunk frames through a rule profile
// against the plain acp relay on the same bytes (relay vs relay-shaped),
// and through the zeroclaw profile on its own chunk frames. The issue's
// budget is a profile cost of at most 3× the relay per frame.
func BenchmarkChunks(b *testing.B) {
	const n = 256
	frames := make([][]byte, n)
	zframes := make([][]byte, n)
	for i := range frames {
		frames[i] = chunkFrame(i)
		zframes[i] = zeroclawChunk(i)
	}
	b.Run("acp-relay", func(b *testing.B) {
		tr := acp.New()
		b.SetBytes(int64(len(frames[0])))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := tr.FromAgent(frames[i%n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("profile-same-bytes", func(b *testing.B) {
		p, diags := Parse("relay-shaped.hcl", []byte(relayShaped))
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		tr := running(b, p, `{"cwd":"/w","mcpServers":[]}`, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}`)
		b.SetBytes(int64(len(frames[0])))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			outs, err := tr.FromAgent(frames[i%n])
			if err != nil || len(outs) != 1 {
				b.Fatal(outs, err)
			}
		}
	})
	b.Run("zeroclaw", func(b *testing.B) {
		tr := running(b, shipped(b, "zeroclaw"), `{"cwd":"/w","mcpServers":[]}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s-1"}}`)
		b.SetBytes(int64(len(zframes[0])))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			outs, err := tr.FromAgent(zframes[i%n])
			if err != nil || len(outs) != 1 {
				b.Fatal(outs, err)
			}
		}
	})
}

// BenchmarkProfileVsRelay times the relay and the relay-shaped profile on
// the same chunk frames in the same run, alternating, and reports the
// profile's cost per frame as a multiple of the relay's (x-relay): the
// issue's budget is 3.
func BenchmarkProfileVsRelay(b *testing.B) {
	const n = 256
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = chunkFrame(i)
	}
	p, diags := Parse("relay-shaped.hcl", []byte(relayShaped))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	prof := running(b, p, `{"cwd":"/w","mcpServers":[]}`, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}`)
	relay := acp.New()
	var relayNs, profNs int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := nanotime()
		for _, f := range frames {
			_, _ = relay.FromAgent(f)
		}
		t1 := nanotime()
		for _, f := range frames {
			_, _ = prof.FromAgent(f)
		}
		t2 := nanotime()
		relayNs += t1 - t0
		profNs += t2 - t1
	}
	b.ReportMetric(float64(relayNs)/float64(b.N*n), "relay-ns/frame")
	b.ReportMetric(float64(profNs)/float64(b.N*n), "profile-ns/frame")
	b.ReportMetric(float64(profNs)/float64(relayNs), "x-relay")
}
