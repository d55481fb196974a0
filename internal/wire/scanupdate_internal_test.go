package wire

import (
	"bytes"
	"reflect"
	"testing"
)

// scanUpdate, the fast path, must read exactly what the long way reads, or
// decline. Every one-byte change, deletion and insertion of a typical
// update, and a few hand-made variants, is read both ways.
func TestScanUpdateAgreesWithTheLongWay(t *testing.T) {
	frames := [][]byte{
		benchUpdate,
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"a\"b\\n\u00e9 ` + "\u00e9" + `"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","_meta":{}}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"x_y","a":1,"b":[true,null,{"c":"\u00e9"}]}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan"},"_meta":{}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan"}},"id":1}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","sessionUpdate":"tool_call"}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\"","update":{"sessionUpdate":"plan"}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan"}}} `),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","t":"` + "\xff" + `"}}}`),
	}
	fast := 0
	check := func(f []byte) {
		t.Helper()
		var got Envelope
		if !scanUpdate(&got, f) {
			return
		}
		fast++
		want, err := scanEnvelope(f)
		if err != nil {
			t.Fatalf("fast path took %q, which the long way refuses: %v", f, err)
		}
		if got.Plain && (bytes.IndexByte(f, '\n') >= 0 || bytes.IndexByte(f, '\r') >= 0) {
			t.Fatalf("fast path read %q as Plain, but it holds a line break", f)
		}
		got.Plain = false // (what the long way does not tell)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fast path read %q as\n%+v\nthe long way as\n%+v", f, got, want)
		}
	}
	for _, f := range frames {
		check(f)
		for i := range f {
			for _, c := range []byte{'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\n', '\r', 'a', '0', 0x01, 0xc3} {
				m := append([]byte(nil), f...)
				m[i] = c
				check(m)
				check(append(append(append([]byte(nil), f[:i]...), c), f[i:]...)) // inserted
			}
			check(append(append([]byte(nil), f[:i]...), f[i+1:]...)) // deleted
		}
	}
	if fast < len(frames)/2 {
		t.Errorf("the fast path took only %d messages", fast)
	}
}
