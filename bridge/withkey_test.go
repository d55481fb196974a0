package bridge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// withKey means what decoding obj, setting the key and encoding it again
// means, for any input; and where obj is a valid object naming the key at
// most once, every other member comes out as the agent wrote it, byte for
// byte and in its order.
func FuzzWithKey(f *testing.F) {
	for _, seed := range []struct{ obj, key, value string }{
		{`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"<a & b>"}}}`, "sessionId", `"b-1"`},
		{`{ "update" : {"x":1} , "sessionId" : "s1" }`, "sessionId", `"b-1"`},
		{`{"update":{"sessionId":"inner"}}`, "sessionId", `"b-1"`},
		{`{}`, "sessionId", `"b-1"`},
		{` { } `, "protocolVersion", `1`},
		{`{"a":1,"a":2}`, "a", `3`},
		{`{"s\u0049d":1}`, "sId", `2`},
		{`[1,2]`, "k", `true`},
		{`not json`, "k", `null`},
		{``, "k", `{}`},
	} {
		f.Add(seed.obj, seed.key, seed.value)
	}
	f.Fuzz(func(t *testing.T, obj, key, value string) {
		if !json.Valid([]byte(value)) || !utf8.ValidString(key) {
			return // callers set a key they name and a value they encoded
		}
		got := withKey(json.RawMessage(obj), key, json.RawMessage(value))
		if !json.Valid(got) {
			t.Fatalf("withKey(%q, %q, %q) = %q: not JSON", obj, key, value, got)
		}
		var gotM, wantM map[string]any
		if err := decodeNumbers(got, &gotM); err != nil {
			t.Fatalf("withKey(%q, %q, %q) = %q: not an object: %v", obj, key, value, got, err)
		}
		if err := decodeNumbers(withKeyRebuilt(json.RawMessage(obj), key, json.RawMessage(value)), &wantM); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotM, wantM) {
			t.Fatalf("withKey(%q, %q, %q) = %q, which means %v; want %v", obj, key, value, got, gotM, wantM)
		}
		trimmed := bytes.TrimSpace([]byte(obj))
		if !gjson.ValidBytes(trimmed) || len(trimmed) == 0 || trimmed[0] != '{' {
			return
		}
		n := 0
		gjson.ParseBytes(trimmed).ForEach(func(k, _ gjson.Result) bool {
			if k.String() == key {
				n++
			}
			return true
		})
		if n > 1 {
			return
		}
		// Fidelity: the other members, raw, in order.
		var before, after []string
		gjson.ParseBytes(trimmed).ForEach(func(k, v gjson.Result) bool {
			if k.String() != key {
				before = append(before, k.Raw+":"+v.Raw)
			}
			return true
		})
		gjson.ParseBytes(got).ForEach(func(k, v gjson.Result) bool {
			if k.String() != key {
				after = append(after, k.Raw+":"+v.Raw)
			}
			return true
		})
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("withKey(%q, %q, %q) = %q: the other members changed: %q → %q", obj, key, value, got, before, after)
		}
	})
}

// decodeNumbers decodes b into v keeping numbers as written (any size).
func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
