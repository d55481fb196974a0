package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/acp-bridge/acp-bridge/internal/wire"
)

func TestParseEnvelope(t *testing.T) {
	for _, tc := range []struct {
		in       string
		code     int    // 0: valid
		kind     string // request, notification, response
		id, meth string
	}{
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, 0, "request", "0", "initialize"},
		{`{"jsonrpc":"2.0","id":"abc","method":"m"}`, 0, "request", `"abc"`, "m"},
		{`{"jsonrpc":"2.0","id":null,"method":"m"}`, 0, "request", "null", "m"},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"m"}`, 0, "request", "9007199254740993", "m"},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"a":1}}`, 0, "notification", "", "session/update"},
		{`{"jsonrpc":"2.0","id":-5,"result":null}`, 0, "response", "-5", ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`, 0, "response", "1", ""},
		{` { "id" : 7 , "method" : "m" } `, 0, "request", "7", "m"},
		{`not json`, -32700, "", "", ""},
		{"{\"id\":1,\"method\":\"\xff\"}", -32700, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"m"}]`, -32600, "", "", ""},
		{`"str"`, -32600, "", "", ""},
		{`{"jsonrpc":"2.0","id":7}`, -32600, "", "7", ""},
		{`{"jsonrpc":"2.0","id":{},"method":"m"}`, -32600, "", "", "m"},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, -32600, "", "1", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, -32600, "", "1", "m"},
		{`{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`, -32600, "", "1", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","result":1}`, -32600, "", "1", "m"},
	} {
		env, err := wire.ParseEnvelope([]byte(tc.in))
		code := 0
		if err != nil {
			code = err.Code
		}
		if code != tc.code {
			t.Errorf("%s: code %d, want %d (%v)", tc.in, code, tc.code, err)
			continue
		}
		if string(env.ID) != tc.id || env.Method != tc.meth {
			t.Errorf("%s: id %q method %q, want %q %q", tc.in, env.ID, env.Method, tc.id, tc.meth)
		}
		if code == 0 {
			kind := map[bool]string{true: "request"}[env.IsRequest()] + map[bool]string{true: "notification"}[env.IsNotification()] + map[bool]string{true: "response"}[env.IsResponse()]
			if kind != tc.kind {
				t.Errorf("%s: kind %q, want %q", tc.in, kind, tc.kind)
			}
		}
	}
}

func TestFramesRoundTrip(t *testing.T) {
	params := json.RawMessage(`{"_meta":{"k":[1,2]},"unknown":true}`)
	for _, f := range [][]byte{
		wire.RequestFrame(json.RawMessage(`"x"`), "a/b", params),
		wire.RequestFrame(json.RawMessage(`0`), "cancelSendMessage", nil),
		wire.NotificationFrame("session/update", params),
		wire.ResultFrame(json.RawMessage(`9007199254740993`), params),
		wire.ErrorFrame(json.RawMessage(`null`), wire.Errorf(-32603, "because %d", 1).JSON()),
	} {
		if !json.Valid(f) {
			t.Fatalf("invalid frame %s", f)
		}
		env, err := wire.ParseEnvelope(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if env.Params != nil && string(env.Params) != string(params) {
			t.Errorf("params changed: %s", env.Params)
		}
	}
	if f := wire.RequestFrame(json.RawMessage(`0`), "cancelSendMessage", nil); string(f) != `{"jsonrpc":"2.0","id":0,"method":"cancelSendMessage"}` {
		t.Errorf("parameterless request = %s", f)
	}
}

func TestErrorIsMatchesCode(t *testing.T) {
	err := fmt.Errorf("routing: %w", wire.Errorf(wire.CodeInvalidParams, "bad cwd"))
	if !errors.Is(err, wire.ErrInvalidParams) || errors.Is(err, wire.ErrInternal) {
		t.Errorf("errors.Is by code failed for %v", err)
	}
	if got := string(wire.Errorf(-32602, "bad cwd").JSON()); got != `{"code":-32602,"message":"bad cwd","data":{"reason":"bad cwd"}}` {
		t.Errorf("JSON = %s", got)
	}
}

// FuzzParseEnvelope checks the decoder never panics, accepts only valid
// JSON, and that what it accepts survives being rebuilt from its parts.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"x":[1,{"y":null}]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m","data":{"details":"d"}}}`,
		`[1,2]`, `{"id":{}}`, `{"id":1e400,"method":"m"}`, "{\"a\":\"\\ud800\"}",
		// Hostile: nesting past the limit, bytes that are not UTF-8.
		strings.Repeat("[", 2*wire.MaxDepth), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"t\":\"\xc3\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		env, err := wire.ParseEnvelope(in)
		if err != nil {
			if err.Code != wire.CodeParseError && err.Code != wire.CodeInvalidRequest {
				t.Fatalf("unexpected code %d", err.Code)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		var rebuilt []byte
		switch {
		case env.IsRequest():
			rebuilt = wire.RequestFrame(env.ID, env.Method, env.Params)
		case env.IsNotification():
			rebuilt = wire.NotificationFrame(env.Method, env.Params)
		case env.Error != nil:
			rebuilt = wire.ErrorFrame(env.ID, env.Error)
		default:
			rebuilt = wire.ResultFrame(env.ID, env.Result)
		}
		again, err := wire.ParseEnvelope(rebuilt)
		if err != nil || string(again.ID) != string(env.ID) || again.Method != env.Method ||
			string(again.Params) != string(env.Params) || string(again.Result) != string(env.Result) {
			t.Fatalf("round trip changed %q into %q (%v)", in, rebuilt, err)
		}
	})
}

func TestFramesQuoteMethods(t *testing.T) {
	for _, m := range []string{"session/update", "_zed.dev/x", "a\"b", "é", "<&>", "tab\t"} {
		f := wire.NotificationFrame(m, nil)
		env, err := wire.ParseEnvelope(f)
		if err != nil || env.Method != m {
			t.Errorf("method %q → %s → %q (%v)", m, f, env.Method, err)
		}
	}
}

// Deep nesting is refused with a parse error, never walked recursively: a
// 6 MB line of "[" used to overflow the goroutine stack (a fatal error that
// recover cannot catch).
func TestParseEnvelope_DeepNesting(t *testing.T) {
	for _, in := range [][]byte{
		bytes.Repeat([]byte("["), 6_000_000),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat("}", 20001) + `}`),
	} {
		_, err := wire.ParseEnvelope(in)
		if err == nil || err.Code != wire.CodeParseError || !strings.Contains(err.Reason, "nested deeper") {
			t.Errorf("ParseEnvelope(%.20s…) = %v, want a -32700 naming the nesting", in, err)
		}
	}
	ok := `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + strings.Repeat(`[`, wire.MaxDepth-2) + strings.Repeat(`]`, wire.MaxDepth-2) + `}}`
	if _, err := wire.ParseEnvelope([]byte(ok)); err != nil {
		t.Errorf("nesting at the limit refused: %v", err)
	}
}

// FuzzValid checks the single-pass validator against encoding/json and
// unicode/utf8 on every input within the depth limit.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2,{"a":"b\u00e9"}]`, `"\xff"`, `{"a":1,}`, `01`, `-0.5e+3`, "\"\x01\"", `[[[[`, `{"a" 1}`, ` true `, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= wire.MaxDepth {
			return
		}
		got := wire.Valid(b) == nil
		want := json.Valid(b) && utf8.Valid(b)
		if got != want {
			t.Errorf("Valid(%q) = %v, want %v", b, got, want)
		}
	})
}

// FuzzEnvelopeAgreesWithEncodingJSON reads every message ParseEnvelope
// accepts a second way, with encoding/json, and checks that both find the
// same members: whatever short ways the scan takes (literal member names,
// the compact forms of updates) must read what the long way reads.
func FuzzEnvelopeAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc": "2.0", "id": 5, "method": "_bench/echo", "params": {"n": 4}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"echo":{"n":1}}}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}}`,
		`{"id":1,"jsonrpc":"2.0","result":null,"id":2}`, `{"jsonrpc":"2.0" ,"id" :3,"result":{}}`,
		`{"jsonrpc":"2.0","idx":1,"id":2,"result":1}`, `{"jsonrpc":"2.0","method":"a\u002fb","id":1}`,
		`{"jsonrpc":"2.0x","id":1,"result":1}`, `{"jsonrpc":"2.0","id":1,"result":1,"params":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		env, err := wire.ParseEnvelope(in)
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if e := json.Unmarshal(in, &m); e != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", in, e)
		}
		same := func(name string, got []byte) {
			want, ok := m[name]
			if ok != (got != nil) || ok && !bytes.Equal(compact(t, got), compact(t, want)) {
				t.Fatalf("%q: %s is %q, encoding/json reads %q (present %v)", in, name, got, want, ok)
			}
		}
		same("id", env.ID)
		same("params", env.Params)
		same("result", env.Result)
		same("error", env.Error)
		var method, version string
		if raw, ok := m["method"]; ok {
			json.Unmarshal(raw, &method)
		}
		if raw, ok := m["jsonrpc"]; ok {
			json.Unmarshal(raw, &version)
		}
		if env.Method != method || env.Version != version {
			t.Fatalf("%q: method %q version %q, encoding/json reads %q %q", in, env.Method, env.Version, method, version)
		}
	})
}

func compact(t *testing.T, raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %q: %v", raw, err)
	}
	return b.Bytes()
}

// FuzzEnvelopeRebase checks that Rebase leaves no field of an envelope in
// the buffer it was read from, whatever the message: every string and
// slice field, found by reflection so that a field added later is checked
// too, either lies in the copy at the same offset or outside both. The
// buffer is then overwritten, and the envelope must still be what parsing
// the copy gives.
func FuzzEnvelopeRebase(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"_x/echo","params":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"x_y","a":1}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"x":[1,{"y":null}]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`,
		`{"id":7,"result":null,"jsonrpc":"2.0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		from := bytes.Clone(in)
		env, perr := wire.ParseEnvelope(from)
		if perr != nil {
			return
		}
		to := bytes.Clone(from)
		env.Rebase(from, to)
		lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(from))), uintptr(unsafe.Pointer(unsafe.SliceData(from)))+uintptr(len(from))
		v := reflect.ValueOf(env)
		for i := range v.NumField() {
			fv, name := v.Field(i), v.Type().Field(i).Name
			var p uintptr
			switch fv.Kind() {
			case reflect.String:
				p = uintptr(unsafe.Pointer(unsafe.StringData(fv.String())))
			case reflect.Slice:
				p = fv.Pointer()
			default:
				continue
			}
			if fv.Len() > 0 && p >= lo && p < hi {
				t.Fatalf("%s still points into the buffer it was read from", name)
			}
		}
		for i := range from {
			from[i] = 'X'
		}
		want, _ := wire.ParseEnvelope(to)
		if !reflect.DeepEqual(env, want) {
			t.Fatalf("rebased envelope differs from the copy's own:\n got %+v\nwant %+v", env, want)
		}
	})
}
