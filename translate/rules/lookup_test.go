package rules

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// rawLookup answers what gjson answers, for every path it handles.
func TestRawLookup_SameAsGjson(t *testing.T) {
	docs := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"q\" é \\ }]"}}}}`,
		`{"a":{"b":[{"c":1},{"c":2}],"0":"zero"},"a.b":"dotted","e":null,"s":"str","n":[1,[2,3]],"t":true,"f":-1.5e3}`,
		` { "sp" : { "x" : [ "]" , "}" ] } , "y":{} } `,
		`[{"x":1},{"x":2}]`,
		`"just a string"`,
		`{"a":1,"a":{"b":2}}`,
		`{"a":{"c":1},"a":{"b":{"d":"deep"}}}`,
		`{"k\"q":1,"k":2}`,
	}
	paths := []string{
		"method", "params", "params.update", "params.update.sessionUpdate", "params.update.content.text",
		"params.sessionId", "params.missing.deeper", "a.b.1.c", "a.b.0", "a.0", "a.b", "a", "e", "e.x", "s.x",
		"n", "n.1.0", "x", "sp", "sp.x", "y", "y.z", "t", "f", "a.b.d", "k", "a.c", "0.x",
	}
	for _, d := range docs {
		doc := []byte(d)
		for _, p := range paths {
			raw, found, handled := rawLookup(doc, p)
			if !handled {
				continue
			}
			want := get(doc, p)
			if found != want.Exists() || string(raw) != want.Raw {
				t.Errorf("doc %s path %q: rawLookup %q (found %v), gjson %q (exists %v)", d, p, raw, found, want.Raw, want.Exists())
			}
		}
	}
	if _, _, handled := rawLookup([]byte(`{"a":[1]}`), "a.0"); handled {
		t.Error("an index into an array must be left to gjson")
	}
	if _, _, handled := rawLookup([]byte(`{"a":1}`), "a.#"); handled {
		t.Error("a query must be left to gjson")
	}
}

// FuzzRawLookup: on any document, rawLookup never panics and agrees with
// gjson whenever it answers and the document is JSON.
func FuzzRawLookup(f *testing.F) {
	f.Add([]byte(`{"a":{"b":"c"}}`), "a.b")
	f.Add([]byte(`{"a":1,"a":{"b":2}}`), "a.b")
	f.Add([]byte(`{"a":"\\"}`), "a")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		raw, found, handled := rawLookup(doc, path)
		if !handled || !validJSON(doc) {
			return
		}
		want := get(doc, path)
		if found != want.Exists() || string(raw) != want.Raw {
			t.Errorf("doc %q path %q: rawLookup %q (found %v), gjson %q (exists %v)", doc, path, raw, found, want.Raw, want.Exists())
		}
	})
}

func validJSON(b []byte) bool { return translate.Valid(b) == nil }
