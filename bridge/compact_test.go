package bridge

import (
	"bytes"
	"encoding/json"
	"testing"
)

// compact gives what json.Compact gives, in the frame's own memory.
func TestCompactInPlace(t *testing.T) {
	for _, in := range []string{
		"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\r\n  \"result\": {\"text\": \"a b\\n \\\" } \\\\\", \"list\": [ 1 , 2.5e3 , true, null ]\n  }\n}\n",
		"[ ]", "\t\"s p a c e\"\t", `{"a":"\\"}`, `{ "é" : "ü  x" }`,
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		frame := []byte(in)
		got := compact(frame)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("compact(%q) = %q, want %q", in, got, want.Bytes())
		}
		if len(got) > 0 && &got[0] != &frame[0] {
			t.Errorf("compact(%q) copied the frame", in)
		}
	}
	// Invalid JSON keeps its bytes but for line breaks, which become spaces.
	if got := compact([]byte("{\"a\":\n1,,}\r\n")); string(got) != `{"a": 1,,}  ` {
		t.Errorf("compact of invalid JSON = %q", got)
	}
}
