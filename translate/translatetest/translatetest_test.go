package translatetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// echo is a trivial translator for testing the runner. Editor side:
// "echo" replies with its params, "fail" fails, "session/new" replies with
// the minted session, "hello" replies with the configured greeting,
// "forward" goes to the agent as {"forward":Ref,"params":…} and is answered
// by the agent frame {"answer":Ref,"result":…}, "ask" makes Call 1 and
// replies with the editor's answer, "boom" returns an error, notifications
// go to the agent as {"note":method}, CancelRequest fails the request with
// -32800. Agent side, besides "answer": {"update":X} notifies session/update
// X, {"call":M} makes a Call with Ref 5, {"cancelcall":N} cancels call N,
// {"fail":N,"error":E} fails request N with E, {"raw":S} sends the agent S unchecked, {"alias":true} returns the
// frame itself (translators own the frames they are fed), and anything
// unparsable is an error.
type echo struct {
	greeting string
	askRef   translate.Ref
}

var echoDialect = translate.Dialect{
	Name: "echo",
	Configure: func(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		var greeting string
		if body != nil {
			attrs, diags := body.JustAttributes()
			if diags.HasErrors() {
				return nil, diags
			}
			if a, ok := attrs["greeting"]; ok {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() {
					return nil, diags
				}
				greeting = v.AsString()
			}
		}
		return func() translate.Translator { return &echo{greeting: greeting} }, nil
	},
}

var echoPerSession = func() translate.Dialect {
	d := echoDialect
	d.PerSession = true
	return d
}()

func (e *echo) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		switch m.Method {
		case "echo":
			return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: bytes.Clone(m.Body)}}, nil
		case "fail":
			return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: translate.Errorf(translate.CodeInvalidParams, "no").JSON()}}, nil
		case "session/new":
			b, _ := json.Marshal(map[string]string{"sessionId": m.Session})
			return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: b}}, nil
		case "hello":
			b, _ := json.Marshal(map[string]string{"greeting": e.greeting})
			return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: b}}, nil
		case "forward":
			return []translate.Out{{Kind: translate.Frame, Body: fmt.Appendf(nil, `{"forward":%d,"params":%s}`, m.Ref, m.Body)}}, nil
		case "ask":
			e.askRef = m.Ref
			return []translate.Out{{Kind: translate.Call, Ref: 1, Method: "fs/read_text_file", Body: []byte(`{"sessionId":"s","path":"/a"}`)}}, nil
		case "boom":
			return nil, errors.New("boom")
		}
		return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: translate.ErrMethodNotFound.JSON()}}, nil
	case translate.Notification:
		return []translate.Out{{Kind: translate.Frame, Body: fmt.Appendf(nil, `{"note":%q}`, m.Method)}}, nil
	case translate.Response:
		if e.askRef == 0 {
			return nil, nil
		}
		body := bytes.Clone(m.Body)
		if m.Error != nil {
			body = []byte(`"failed"`)
		}
		return []translate.Out{{Kind: translate.Reply, Ref: e.askRef, Body: body}}, nil
	case translate.CancelRequest:
		return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: []byte(`{"code":-32800,"message":"Request cancelled"}`)}}, nil
	case translate.Abandon:
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected kind %d", m.Kind)
}

func (e *echo) FromAgent(frame []byte) ([]translate.Out, error) {
	if !gjson.ValidBytes(frame) {
		return nil, errors.New("agent frame is not JSON")
	}
	v := gjson.ParseBytes(frame)
	switch {
	case v.Get("answer").Exists():
		return []translate.Out{{Kind: translate.Reply, Ref: translate.Ref(v.Get("answer").Uint()), Body: []byte(v.Get("result").Raw)}}, nil
	case v.Get("fail").Exists():
		return []translate.Out{{Kind: translate.Fail, Ref: translate.Ref(v.Get("fail").Uint()), Body: []byte(v.Get("error").Raw)}}, nil
	case v.Get("update").Exists():
		return []translate.Out{{Kind: translate.Notify, Method: "session/update", Body: []byte(v.Get("update").Raw)}}, nil
	case v.Get("call").Exists():
		return []translate.Out{{Kind: translate.Call, Ref: 5, Method: v.Get("call").Str, Body: []byte(`{}`)}}, nil
	case v.Get("cancelcall").Exists():
		return []translate.Out{{Kind: translate.CancelCall, Ref: translate.Ref(v.Get("cancelcall").Uint())}}, nil
	case v.Get("raw").Exists():
		return []translate.Out{{Kind: translate.Frame, Body: []byte(v.Get("raw").Str)}}, nil
	case v.Get("alias").Exists():
		return []translate.Out{{Kind: translate.Frame, Body: frame}}, nil
	}
	return nil, nil
}

func TestRun(t *testing.T) {
	Run(t, echoDialect, "testdata/*.txtar")
}

// transcript builds a txtar file from a header and transcript lines.
func transcript(header string, lines ...string) []byte {
	return []byte(header + "\n-- transcript --\n" + strings.Join(lines, "\n") + "\n")
}

func TestCheck_Mismatch(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string // substring of the mismatch report; "" = no mismatch
	}{
		{"structural match ignores key order and spaces", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1,"b":[true]}}`,
			`>editor {"result": {"b": [true], "a": 1}, "id": 1, "jsonrpc": "2.0"}`,
		}, ""},
		{"different value", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}`,
			`>editor {"jsonrpc":"2.0","id":1,"result":{"a":2}}`,
		}, "want:"},
		{"numbers compare by literal", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}`,
			`>editor {"jsonrpc":"2.0","id":1,"result":{"a":1.0}}`,
		}, "want:"},
		{"exact marker compares bytes", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1,"b":2}}`,
			`>editor= {"jsonrpc":"2.0","id":1,"result":{"b":2,"a":1}}`,
		}, "want:"},
		{"exact marker matches identical bytes", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{"b":2,"a":1}}`,
			`>editor= {"jsonrpc":"2.0","id":1,"result":{"b":2,"a":1}}`,
		}, ""},
		{"missing output", []string{
			`editor> {"jsonrpc":"2.0","method":"ping"}`,
			`>agent {"note":"ping"}`,
			`>agent {"note":"ping"}`,
		}, "missing (line"},
		{"unexpected output", []string{
			`editor> {"jsonrpc":"2.0","method":"ping"}`,
		}, `unexpected: >agent {"note":"ping"}`},
		{"wrong direction", []string{
			`editor> {"jsonrpc":"2.0","method":"ping"}`,
			`>editor {"note":"ping"}`,
		}, "want:"},
		{"error text", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"boom"}`,
			`>error bang`,
		}, "got:  >error boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(echoDialect, "x.txtar", transcript("scenario", tt.lines...))
			if len(res.problems) > 0 {
				t.Fatalf("problems: %v", res.problems)
			}
			got := strings.Join(res.mismatches, "\n")
			if tt.want == "" && got != "" {
				t.Errorf("mismatches = %s, want none", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("mismatches = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestCheck_Invariants(t *testing.T) {
	tests := []struct {
		name   string
		header string
		lines  []string
		want   string // substring of a problem; "" = no problem
	}{
		{"unanswered request", "", []string{
			`editor> {"jsonrpc":"2.0","id":7,"method":"forward","params":{}}`,
		}, "request 7 (forward) was never answered"},
		{"pending header allows it", "pending: 7", []string{
			`editor> {"jsonrpc":"2.0","id":7,"method":"forward","params":{}}`,
		}, ""},
		{"pending header with string id", `pending: "x", 8`, []string{
			`editor> {"jsonrpc":"2.0","id":"x","method":"forward","params":{}}`,
			`editor> {"jsonrpc":"2.0","id":8,"method":"forward","params":{}}`,
		}, ""},
		{"pending header must be honest", "pending: 7", []string{
			`editor> {"jsonrpc":"2.0","id":7,"method":"echo","params":{}}`,
		}, "listed as pending but was answered"},
		{"pending id unknown", "pending: 9", nil, "no editor request has id 9"},
		{"cancel-grace not a duration", "cancel-grace: soon", nil, `cancel-grace: "soon" is not a positive duration`},
		{"answer for a Ref never given", "", []string{
			`agent> {"answer":4,"result":{}}`,
		}, "answers Ref 4, which the editor never sent"},
		{"second answer", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"echo","params":{}}`,
			`agent> {"answer":1,"result":{}}`,
		}, "a second time"},
		{"answer after abandon", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}`,
			`event> abandon 1`,
			`agent> {"answer":1,"result":{}}`,
		}, "after it was abandoned"},
		{"abandon counts as answered", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}`,
			`event> abandon 1`,
		}, ""},
		{"error return counts as answered", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"boom"}`,
		}, ""},
		{"invalid JSON output", "", []string{
			`agent> {"raw":"{not json"}`,
		}, "not valid JSON"},
		{"multi-line output", "", []string{
			`agent> {"raw":"{\n}"}`,
		}, "raw newline"},
		{"session/update without sessionId", "", []string{
			`agent> {"update":{"update":{"sessionUpdate":"plan","entries":[]}}}`,
		}, "without a sessionId"},
		{"session/update without sessionUpdate", "", []string{
			`agent> {"update":{"sessionId":"s","update":{}}}`,
		}, "without update.sessionUpdate"},
		{"valid session/update", "", []string{
			`agent> {"update":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`,
		}, ""},
		{"Call Ref reused while outstanding", "", []string{
			`agent> {"call":"a"}`,
			`agent> {"call":"b"}`,
		}, "Call Ref 5 reused"},
		{"Call Ref reusable once answered", "", []string{
			`agent> {"call":"a"}`,
			`editor> {"jsonrpc":"2.0","id":5,"result":{}}`,
			`agent> {"call":"b"}`,
		}, ""},
		{"CancelCall for no call", "", []string{
			`agent> {"cancelcall":3}`,
		}, "CancelCall for Ref 3"},
		{"Fail body without code", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}`,
			`agent> {"fail":1,"error":{"message":"x"}}`,
		}, "no integer code"},
		{"Fail body with fractional code", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}`,
			`agent> {"fail":1,"error":{"code":1.5,"message":"x"}}`,
		}, "no integer code"},
		{"Fail body without message", "", []string{
			`editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}`,
			`agent> {"fail":1,"error":{"code":1}}`,
		}, "no string message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(echoDialect, "x.txtar", transcript(tt.header, tt.lines...))
			got := strings.Join(res.problems, "\n")
			if tt.want == "" && got != "" {
				t.Errorf("problems = %s, want none", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("problems = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestCheck_TranscriptErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"no transcript", "prose\n-- options.hcl --\n", "no -- transcript -- section"},
		{"unknown section", "-- transcipt --\n", `unknown section "transcipt"`},
		{"unknown marker", "-- transcript --\nclient> {}\n", `x.txtar:2: unknown line marker "client>"`},
		{"expected before input", "a\nb\n-- transcript --\n# c\n>agent {}\n", "x.txtar:5: expected output before any input"},
		{"editor line not JSON", "-- transcript --\neditor> {\n", "x.txtar:2: editor message"},
		{"response to no call", "-- transcript --\neditor> {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n", "answers call 3, which is not outstanding"},
		{"event for unknown id", "-- transcript --\nevent> abandon 3\n", "no editor request has id 3"},
		{"bad options", "-- options.hcl --\ngreeting = \n-- transcript --\n", "options.hcl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(echoDialect, "x.txtar", []byte(tt.file))
			if got := strings.Join(res.problems, "\n"); !strings.Contains(got, tt.want) {
				t.Errorf("problems = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestCheck_Rewrite(t *testing.T) {
	file := `Scenario prose.
pending: 2

-- options.hcl --
greeting = "hi"
-- transcript --
# setup
editor> {"jsonrpc":"2.0","id":1,"method":"hello"}
>editor= {"jsonrpc":"2.0","id":1,"result":{"greeting":"old"}}
# after hello
editor> {"jsonrpc":"2.0","id":2,"method":"forward","params":{}}
editor> {"jsonrpc":"2.0","method":"ping"}
>agent {"stale":1}
>agent {"stale":2}
editor> {"jsonrpc":"2.0","id":3,"method":"echo","params":{"b":1,"a":2}}
>editor {"id":3, "jsonrpc":"2.0", "result":{"a":2,"b":1}}

agent> {"update":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}
# trailing comment
`
	want := `Scenario prose.
pending: 2

-- options.hcl --
greeting = "hi"
-- transcript --
# setup
editor> {"jsonrpc":"2.0","id":1,"method":"hello"}
>editor= {"jsonrpc":"2.0","id":1,"result":{"greeting":"hi"}}
# after hello
editor> {"jsonrpc":"2.0","id":2,"method":"forward","params":{}}
>agent {"forward":2,"params":{}}
editor> {"jsonrpc":"2.0","method":"ping"}
>agent {"note":"ping"}
editor> {"jsonrpc":"2.0","id":3,"method":"echo","params":{"b":1,"a":2}}
>editor {"id":3, "jsonrpc":"2.0", "result":{"a":2,"b":1}}

agent> {"update":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}
>editor {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}
# trailing comment
`
	res := check(echoDialect, "x.txtar", []byte(file))
	if len(res.problems) > 0 {
		t.Fatalf("problems: %v", res.problems)
	}
	if len(res.mismatches) != 4 {
		t.Errorf("got %d mismatching steps, want 4: %v", len(res.mismatches), res.mismatches)
	}
	if string(res.rewritten) != want {
		t.Errorf("rewritten =\n%s\nwant\n%s", res.rewritten, want)
	}
	// Matching lines keep their spelling (id 3); the rewritten file passes.
	again := check(echoDialect, "x.txtar", res.rewritten)
	if len(again.problems)+len(again.mismatches) > 0 {
		t.Errorf("rewritten file fails: %v %v", again.problems, again.mismatches)
	}
}

func TestDriver_Sessions(t *testing.T) {
	for _, tt := range []struct {
		d    translate.Dialect
		want []string
	}{
		{echoPerSession, []string{`"sess-1"`, `"sess-2"`}},
		{echoDialect, []string{`""`, `""`}},
	} {
		dr, err := NewDriver(tt.d, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range tt.want {
			out, err := dr.Feed(fmt.Sprintf(`editor> {"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/"}}`, i))
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.Get(out[0].Text, "result.sessionId").Raw; got != want {
				t.Errorf("PerSession=%v: session %d = %s, want %s", tt.d.PerSession, i, got, want)
			}
		}
	}
}

func TestDriver_CancelRequest(t *testing.T) {
	dr, err := NewDriver(echoDialect, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct{ in, want string }{
		{`editor> {"jsonrpc":"2.0","id":"a","method":"forward","params":{}}`, `>agent {"forward":1,"params":{}}`},
		// The engine turns $/cancel_request for a pending request into CancelRequest.
		{`editor> {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a"}}`, `>editor {"jsonrpc":"2.0","id":"a","error":{"code":-32800,"message":"Request cancelled"}}`},
		// and drops one for a request no longer pending.
		{`editor> {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a"}}`, ``},
	}
	for _, s := range steps {
		out, err := dr.Feed(s.in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range out {
			got = append(got, o.Marker+" "+o.Text)
		}
		if strings.Join(got, "\n") != s.want {
			t.Errorf("after %s: got %q, want %q", s.in, got, s.want)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{ "b":2, "a":1 }`, true},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":null}`, `{}`, false},
		{`1`, `1.0`, false},
		{`not json`, `not json`, true},
		{`not json`, `"not json"`, false},
		{`{}`, `{} {}`, false},
	}
	for _, tt := range tests {
		if got := JSONEqual([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("JSONEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFuzzOne(t *testing.T) {
	setup := `
editor> {"jsonrpc":"2.0","id":1,"method":"forward","params":{}}
>agent expected lines are ignored
`
	tests := []struct {
		name, data string
		want       string // substring of the error; "" = none
	}{
		{"clean frames", "{\"answer\":1,\"result\":{}}\nnot json\n", ""},
		{"editor lines are fed as editor input", "editor> {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"echo\",\"params\":{}}", ""},
		{"unfeedable editor lines are skipped", "editor> {", ""},
		{"answer for the setup request twice", "{\"answer\":1,\"result\":{}}\n{\"answer\":1,\"result\":{}}", "a second time"},
		{"answer for a Ref never given", `{"answer":4,"result":{}}`, "answers Ref 4"},
		{"invalid output", `{"raw":"["}`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fuzzOne(echoDialect, []byte(`greeting = "x"`), setup, []byte(tt.data))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("fuzzOne = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("fuzzOne = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := fuzzOne(echoDialect, nil, "editor> {", nil); err == nil || !strings.Contains(err.Error(), "setup") {
		t.Errorf("bad setup: fuzzOne = %v, want a setup error", err)
	}
}

func TestAgentLines(t *testing.T) {
	frames, err := AgentLines("testdata/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) < 3 || string(frames[len(frames)-1]) != "not json" {
		t.Errorf("AgentLines = %q, want the agent> payloads of testdata/echo.txtar", frames)
	}
}
