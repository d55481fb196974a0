package acp_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func TestGolden(t *testing.T) {
	translatetest.Run(t, acp.Dialect, "testdata/*.txtar")
}

const fuzzSetup = `
editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}
`

// FuzzFromAgent feeds arbitrary agent frames to a relay with a prompt
// running: no panic, and no answer for a request the editor never made.
func FuzzFromAgent(f *testing.F) {
	seeds, err := translatetest.AgentLines("testdata/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	translatetest.FuzzAgent(f, acp.Dialect, "", fuzzSetup)
}

// A large editor request goes to the agent in its own bytes, with the
// agent-hop id written over the editor's (padded with spaces) instead of a
// rebuilt copy; when the new id does not fit, the frame is rebuilt.
func TestRelay_LargeRequestSplicedInPlace(t *testing.T) {
	big := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		id     string
		splice bool
	}{{`"editor-7"`, true}, {`12345`, true}, {`0`, true}, {`"a\"b"`, true}} {
		r := acp.New()
		frame := []byte(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"_x/big","params":{"p":"` + big + `"}}`)
		at := bytes.Index(frame, []byte(`"id":`)) + len(`"id":`)
		params := frame[bytes.Index(frame, []byte(`{"p"`)) : len(frame)-1]
		outs, err := r.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "_x/big", Body: params, Frame: frame, IDAt: at})
		if err != nil || len(outs) != 1 {
			t.Fatalf("id %s: outs %v, err %v", tc.id, len(outs), err)
		}
		got := outs[0].Body
		if !json.Valid(got) || gjson.GetBytes(got, "id").Raw != "1" || gjson.GetBytes(got, "params.p").Str != big {
			t.Errorf("id %s: frame to the agent is not the request with id 1: %.80s", tc.id, got)
		}
		if spliced := &got[0] == &frame[0]; spliced != tc.splice {
			t.Errorf("id %s: spliced in place = %v, want %v", tc.id, spliced, tc.splice)
		}
	}
}

func TestRelay_LargeRequestRebuiltWhenIDDoesNotFit(t *testing.T) {
	r := acp.New()
	for ref := translate.Ref(1); ref <= 9; ref++ {
		r.FromEditor(translate.Msg{Kind: translate.Request, Ref: ref, Method: "_x", Body: []byte(`{}`)})
	}
	big := strings.Repeat("x", 70<<10)
	frame := []byte(`{"jsonrpc":"2.0","id":0,"method":"_x/big","params":{"p":"` + big + `"}}`)
	params := frame[bytes.Index(frame, []byte(`{"p"`)) : len(frame)-1]
	outs, _ := r.FromEditor(translate.Msg{Kind: translate.Request, Ref: 10, Method: "_x/big", Body: params, Frame: frame, IDAt: 22})
	got := outs[0].Body
	if gjson.GetBytes(got, "id").Raw != "10" || gjson.GetBytes(got, "params.p").Str != big || &got[0] == &frame[0] {
		t.Errorf("frame to the agent: %.60s (in place: %v)", got, &got[0] == &frame[0])
	}
	if gjson.GetBytes(frame, "id").Raw != "0" {
		t.Errorf("the editor's frame was changed although it was not used: %.40s", frame)
	}
}

// TestFromAgent_deepFrames: a hostile agent's deeply nested frame is refused
// with -32700, not a fatal stack overflow.
func TestFromAgent_deepFrames(t *testing.T) {
	translatetest.CheckDeepFrames(t, acp.Dialect, fuzzSetup)
}
