package acp

import (
	"bytes"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// After the shim has passed an answer on, nothing of it may stay reachable
// from the translator: the engine clears only the slice a translator
// returns (which may be the relay's reused one), and any other would hold a
// large answer until the agent's next frame, which an idle bridge never
// gets.
func TestShimKeepsNothingOfAnAnswer(t *testing.T) {
	s := NewShim(ShimOptions{})
	if _, err := s.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "_bench/echo", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"echo":"` + string(bytes.Repeat([]byte("x"), 1<<10)) + `"}}`)
	outs, err := s.FromAgent(answer)
	if err != nil || len(outs) != 1 || outs[0].Kind != translate.Reply {
		t.Fatalf("FromAgent = %+v, %v; want one Reply", outs, err)
	}
	clear(outs) // what the engine does with the slice a translator returns
	for i, o := range s.r.outs[:cap(s.r.outs)] {
		if o.Body != nil || o.Params != nil {
			t.Errorf("the relay's reused slice still holds output %d (%d bytes) after the shim passed it on", i, len(o.Body))
		}
	}
}
