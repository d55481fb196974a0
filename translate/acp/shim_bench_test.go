package acp_test

import (
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// compliantTurn is a turn's traffic from a compliant agent, the frames a
// shim sees most: message chunks, a tool call and its updates.
var compliantTurn = [][]byte{
	[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"Let me look at the file first."}}}}`),
	[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"Read main.go","kind":"read","status":"pending","rawInput":{"path":"/w/main.go"}}}}`),
	[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"package main\n\nfunc main() {}\n"}}]}}}`),
	[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The file declares an empty main function, "}}}}`),
	[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"so the program does nothing when run."}}}}`),
}

// primed returns tr with a session open and a prompt running on it.
func primed(b *testing.B, tr translate.Translator) translate.Translator {
	steps := []struct {
		editor bool
		m      translate.Msg
		frame  string
	}{
		{editor: true, m: translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: []byte(`{"protocolVersion":1}`)}},
		{frame: `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`},
		{editor: true, m: translate.Msg{Kind: translate.Request, Ref: 2, Method: "session/new", Body: []byte(`{"cwd":"/w","mcpServers":[]}`)}},
		{frame: `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}`},
		{editor: true, m: translate.Msg{Kind: translate.Request, Ref: 3, Method: "session/prompt", Body: []byte(`{"sessionId":"s","prompt":[]}`)}},
	}
	for _, s := range steps {
		var err error
		if s.editor {
			_, err = tr.FromEditor(s.m)
		} else {
			_, err = tr.FromAgent([]byte(s.frame))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return tr
}

func benchStream(b *testing.B, tr translate.Translator) {
	tr = primed(b, tr)
	var bytes int64
	for _, f := range compliantTurn {
		bytes += int64(len(f))
	}
	b.SetBytes(bytes / int64(len(compliantTurn)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		outs, err := tr.FromAgent(compliantTurn[i%len(compliantTurn)])
		if err != nil || len(outs) != 1 || outs[0].Kind != translate.Forward {
			b.Fatalf("outs %v, err %v", outs, err)
		}
	}
}

// BenchmarkShimStream is the per-message cost of the compliance shim on a
// compliant agent's turn (shim) against the plain relay (relay).
func BenchmarkShimStream(b *testing.B) {
	b.Run("relay", func(b *testing.B) { benchStream(b, acp.New()) })
	b.Run("shim", func(b *testing.B) { benchStream(b, acp.NewShim(acp.ShimOptions{})) })
}

// BenchmarkShimRatio reports the shim's cost as a multiple of the relay's
// (target: at most 1.3), both measured in the same run, interleaved in
// blocks of 256 messages so that a busy machine slows both alike.
func BenchmarkShimRatio(b *testing.B) {
	relay := primed(b, acp.New())
	shim := primed(b, acp.NewShim(acp.ShimOptions{}))
	var tr, ts time.Duration
	msgs := 0
	for b.Loop() {
		t0 := time.Now()
		for i := range 256 {
			relay.FromAgent(compliantTurn[i%len(compliantTurn)])
		}
		t1 := time.Now()
		for i := range 256 {
			shim.FromAgent(compliantTurn[i%len(compliantTurn)])
		}
		tr += t1.Sub(t0)
		ts += time.Since(t1)
		msgs += 256
	}
	b.ReportMetric(float64(ts)/float64(tr), "shim/relay")
	b.ReportMetric(float64(tr)/float64(msgs), "relay-ns/msg")
	b.ReportMetric(float64(ts)/float64(msgs), "shim-ns/msg")
}
