package acp

import (
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// The late-updates hold costs an agent that behaves only FirstQuiet per
// turn; once the agent has sent a turn's update after its answer, every
// later answer is held the full DefaultQuiet. A configured quiet period is
// used as it is.
func TestShimQuiet_ShortUntilALateUpdateIsSeen(t *testing.T) {
	s := NewShim(ShimOptions{})
	ref := translate.Ref(0)
	// request sends an editor request and returns the agent-hop id it got.
	request := func(method, params string) string {
		t.Helper()
		ref++
		outs, err := s.FromEditor(translate.Msg{Kind: translate.Request, Ref: ref, Method: method, Body: []byte(params)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.Kind == translate.Frame {
				return gjson.GetBytes(o.Body, "id").Raw
			}
		}
		t.Fatalf("%s: no frame to the agent in %+v", method, outs)
		return ""
	}
	answer := func(id, result string) []translate.Out {
		t.Helper()
		outs, err := s.FromAgent([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	hold := func(outs []translate.Out) time.Duration {
		for _, o := range outs {
			if o.Kind == translate.Timer {
				return o.Delay
			}
		}
		return 0
	}
	answer(request("session/new", `{"cwd":"/w","mcpServers":[]}`), `{"sessionId":"s1"}`)
	turn := func() time.Duration {
		t.Helper()
		d := hold(answer(request("session/prompt", `{"sessionId":"s1","prompt":[]}`), `{"stopReason":"end_turn"}`))
		if _, err := s.FromEditor(translate.Msg{Kind: translate.Tick}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i := range 3 {
		if d := turn(); d != FirstQuiet {
			t.Fatalf("turn %d of a well-behaved agent held its answer %v, want %v", i, d, FirstQuiet)
		}
	}
	// A late update: the agent's turns are held the full period from now on.
	if _, err := s.FromAgent([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"afterthought"}}}}`)); err != nil {
		t.Fatal(err)
	}
	if d := turn(); d != DefaultQuiet {
		t.Fatalf("after a late update the answer was held %v, want %v", d, DefaultQuiet)
	}
	configured := NewShim(ShimOptions{Quiet: 7 * time.Millisecond})
	s = configured
	answer(request("session/new", `{"cwd":"/w","mcpServers":[]}`), `{"sessionId":"s1"}`)
	if d := turn(); d != 7*time.Millisecond {
		t.Fatalf("a configured quiet period was held %v", d)
	}
}
