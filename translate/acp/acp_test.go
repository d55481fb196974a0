package acp_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"

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

// A large editor request goes to the agent in its own bytes, with only the
// editor's id replaced by the agent-hop id (no padding: every other byte is
// the editor's), instead of a rebuilt copy. A shorter id closes the gap by
// moving the smaller side of the frame, the id's head or its tail.
func TestRelay_LargeRequestSplicedInPlace(t *testing.T) {
	big := strings.Repeat("x", 70<<10)
	for _, tc := range []struct{ head, id, tail string }{
		{`{"jsonrpc":"2.0","id":`, `"editor-7"`, `,"method":"_x/big","params":{"p":"` + big + `"}}`},
		{`{"jsonrpc":"2.0","id":`, `12345`, `,"method":"_x/big","params":{"p":"` + big + `"}}`},
		{`{"jsonrpc":"2.0","id":`, `0`, `,"method":"_x/big","params":{"p":"` + big + `"}}`},
		{`{"jsonrpc":"2.0", "id" : `, `"a\"b"`, ` ,"method":"_x/big","params":{"p":"` + big + `"}}`},
		// The id after the payload: the tail is the smaller side.
		{`{"jsonrpc":"2.0","method":"_x/big","params":{"p":"` + big + `"},"id":`, `"editor-7"`, `}`},
	} {
		r := acp.New()
		frame := []byte(tc.head + tc.id + tc.tail)
		frame = frame[:len(frame):len(frame)]
		params := frame[bytes.Index(frame, []byte(`{"p"`)):]
		params = params[:bytes.IndexByte(params, '}')+1]
		outs, err := r.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "_x/big", Body: params, Frame: frame, IDAt: len(tc.head)})
		if err != nil || len(outs) != 1 {
			t.Fatalf("id %s: outs %v, err %v", tc.id, len(outs), err)
		}
		got := outs[0].Body
		if want := tc.head + "1" + tc.tail; string(got) != want {
			t.Errorf("id %s: frame to the agent is not the editor's with id 1: %.80s…%.40s", tc.id, got, got[len(got)-40:])
		}
		if !sameMemory(got, frame) {
			t.Errorf("id %s: the frame was copied, not spliced in place", tc.id)
		}
	}
}

// A longer agent-hop id moves the tail into the frame's spare capacity;
// with none, the frame is rebuilt and the editor's left as it was.
func TestRelay_LargeRequestLongerID(t *testing.T) {
	big := strings.Repeat("x", 70<<10)
	head, tail := `{"jsonrpc":"2.0","id":`, `,"method":"_x/big","params":{"p":"`+big+`"}}`
	for _, spare := range []int{0, 1, 20} {
		r := acp.New()
		for ref := translate.Ref(1); ref <= 9; ref++ {
			r.FromEditor(translate.Msg{Kind: translate.Request, Ref: ref, Method: "_x", Body: []byte(`{}`)})
		}
		frame := append(make([]byte, 0, len(head)+1+len(tail)+spare), head+"0"+tail...)
		params := frame[bytes.Index(frame, []byte(`{"p"`)) : len(frame)-1]
		outs, _ := r.FromEditor(translate.Msg{Kind: translate.Request, Ref: 10, Method: "_x/big", Body: params, Frame: frame, IDAt: len(head)})
		got := outs[0].Body
		if string(got) != head+"10"+tail {
			t.Errorf("spare %d: frame to the agent: %.60s", spare, got)
		}
		if inPlace := sameMemory(got, frame); inPlace != (spare > 0) {
			t.Errorf("spare %d: in place = %v, want %v", spare, inPlace, spare > 0)
		}
		if spare == 0 && string(frame) != head+"0"+tail {
			t.Errorf("the editor's frame was changed although it was not used: %.40s", frame)
		}
	}
}

// sameMemory reports whether a and b are slices of one backing array.
func sameMemory(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// TestFromAgent_deepFrames: a hostile agent's deeply nested frame is refused
// with -32700, not a fatal stack overflow.
func TestFromAgent_deepFrames(t *testing.T) {
	translatetest.CheckDeepFrames(t, acp.Dialect, fuzzSetup)
}

// A request relayed and answered costs the relay one allocation, the frame
// it builds for the agent: the slices it returns its outputs in are its own
// and reused (the engine copies what it keeps), and a round trip is what
// every echo, permission and prompt pays. The shim, which fronts the relay
// by default, adds none either.
func TestRoundTripAllocatesOnlyTheFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   interface {
			translate.Translator
			translate.EnvelopeTranslator
		}
	}{{"relay", acp.New()}, {"shim", acp.NewShim(acp.ShimOptions{})}} {
		t.Run(tc.name, func(t *testing.T) {
			ref := translate.Ref(0)
			var env translate.Envelope // (given to an interface: on the heap once, not per call)
			body := []byte(`{"n":1}`)
			roundTrip := func() {
				ref++
				outs, err := tc.tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: ref, Method: "_bench/echo", Body: body})
				if err != nil || len(outs) != 1 || outs[0].Kind != translate.Frame {
					t.Fatalf("request: %v %+v", err, outs)
				}
				sent := outs[0].Body
				i := bytes.Index(sent, []byte(`"id":`)) + len(`"id":`)
				j := i + bytes.IndexByte(sent[i:], ',')
				// (The agent's answer is a frame of its own, which the
				// translator may keep: the test's one allocation.)
				f := make([]byte, 0, 64)
				f = append(append(append(f, `{"jsonrpc":"2.0","id":`...), sent[i:j]...), `,"result":{"n":1}}`...)
				var perr *translate.Error
				env, perr = translate.ParseEnvelope(f)
				outs, err = tc.tr.FromAgentEnvelope(f, &env, perr)
				if err != nil || len(outs) != 1 || outs[0].Kind != translate.Reply || outs[0].Ref != ref {
					t.Fatalf("answer: %v %+v", err, outs)
				}
			}
			for range 100 { // (the maps reach their size)
				roundTrip()
			}
			if n := testing.AllocsPerRun(1000, roundTrip) - 1; n > 1 {
				t.Errorf("a relayed round trip costs %.1f allocations, want 1 (the agent's frame)", n)
			}
		})
	}
}
