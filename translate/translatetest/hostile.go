package translatetest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// DeepFrames returns agent frames nested far deeper than translate.MaxDepth,
// by name: bare brackets, nested objects, and well-formed envelopes (a
// request, a notification, a response) whose payload is the deep part. Each
// is about 6 MB. A recursive JSON validator or parser overflows the goroutine
// stack on them, a fatal error that recover cannot catch.
func DeepFrames() map[string][]byte {
	deep := bytes.Repeat([]byte("["), 6_000_000)
	envelope := func(head string) []byte {
		return append([]byte(head), deep...)
	}
	return map[string][]byte{
		"brackets":     deep,
		"objects":      bytes.Repeat([]byte(`{"a":`), 1_200_000),
		"request":      envelope(`{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":`),
		"notification": envelope(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":`),
		"response":     envelope(`{"jsonrpc":"2.0","id":1,"result":`),
	}
}

// CheckDeepFrames brings a fresh translator of d (no options) to a state by
// feeding the transcript lines of setup, then feeds each of DeepFrames to
// FromAgent and requires an error naming the nesting limit, no output that
// breaks the Driver's invariants, and no crash. It then feeds a session/update
// nested just within the limit and requires only that the translator survives
// it with valid output: what it does with the frame is the dialect's business.
func CheckDeepFrames(t *testing.T, d translate.Dialect, setup string) {
	t.Helper()
	newDriver := func() *Driver {
		t.Helper()
		dr, err := NewDriver(d, nil, "options.hcl")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(setup, "\n") {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			if _, err := dr.Feed(l); err != nil {
				t.Fatalf("setup: %v", err)
			}
		}
		if p := dr.Problems(); len(p) > 0 {
			t.Fatalf("setup: %s", strings.Join(p, "\n"))
		}
		return dr
	}
	for name, frame := range DeepFrames() {
		dr := newDriver()
		outs := dr.Agent(frame)
		var gotErr bool
		for _, o := range outs {
			if o.Marker == GotError && strings.Contains(o.Text, "nested deeper than") {
				gotErr = true
			}
		}
		if !gotErr {
			t.Errorf("%s: FromAgent outputs %v, want an error saying the frame is nested too deep", name, outs)
		}
		if p := dr.Problems(); len(p) > 0 {
			t.Errorf("%s: %s", name, strings.Join(p, "\n"))
		}
	}
	// The frame, params and update objects are three levels; _meta fills
	// the rest up to exactly MaxDepth.
	n := translate.MaxDepth - 3
	atLimit := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"_meta":` +
		strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`)
	if err := translate.Valid(atLimit); err != nil {
		t.Fatalf("frame nested %d levels: %v", translate.MaxDepth, err)
	}
	dr := newDriver()
	dr.Agent(atLimit)
	if p := dr.Problems(); len(p) > 0 {
		t.Errorf("frame nested %d levels: %s", translate.MaxDepth, strings.Join(p, "\n"))
	}
}
