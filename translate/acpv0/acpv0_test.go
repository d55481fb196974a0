package acpv0

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"

	"github.com/tidwall/gjson"
)

func TestTranscripts(t *testing.T) {
	translatetest.Run(t, Dialect, "testdata/*.txtar")
}

func TestDialect(t *testing.T) {
	if Dialect.Name != "acp-v0" || !Dialect.PerSession || Dialect.Configure == nil || Dialect.Summary == "" {
		t.Errorf("Dialect = %+v, want acp-v0, PerSession, with Configure and Summary", Dialect)
	}
}

// initializeFrame configures the dialect with src (nil: no options block) and
// returns the legacy initialize the translator sends.
func initializeFrame(t *testing.T, src []byte) (string, hcl.Diagnostics) {
	t.Helper()
	var body hcl.Body
	if src != nil {
		f, diags := hclparse.NewParser().ParseHCL(src, "acp-v0.hcl")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		body = f.Body
	}
	newTranslator, diags := Dialect.Configure(body)
	if diags.HasErrors() {
		return "", diags
	}
	outs, err := newTranslator().FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: json.RawMessage(`{"protocolVersion":1}`)})
	if err != nil || len(outs) != 1 {
		t.Fatalf("initialize: %v %v", outs, err)
	}
	return string(outs[0].Body), diags
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name     string
		src      string // "-" = no options block
		want     string // the legacy initialize frame
		wantDiag string // substring of the diagnostics, with the range
	}{
		{"no block", "-", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`, ""},
		{"empty block", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`, ""},
		{"version", `protocol_version = "0.0.10"`, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.10"}}`, ""},
		{"unknown key", "protocol_version = \"0.0.9\"\nmodel = \"x\"\n", "", `acp-v0.hcl:2,1-6: Unsupported argument`},
		{"not 0.0.x", `protocol_version = "0.1.0"`, "", `acp-v0.hcl:1,20-27: Invalid protocol_version`},
		{"not a string", `protocol_version = 9`, "", `acp-v0.hcl:1,20-21: Invalid protocol_version`},
		{"block", "legacy {\n}\n", "", `acp-v0.hcl:1,1-7: Unsupported block type`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src []byte
			if tt.src != "-" {
				src = []byte(tt.src)
			}
			got, diags := initializeFrame(t, src)
			if tt.wantDiag != "" {
				if !strings.Contains(diags.Error(), tt.wantDiag) {
					t.Fatalf("diagnostics = %q, want %q", diags.Error(), tt.wantDiag)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got != tt.want {
				t.Errorf("initialize frame = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsLegacyVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"0.0.9": true, "0.0.0": true, "0.0.10": true, "0.0.9-beta.1": true, "0.0.9+build": true,
		"0.0.09": false, "0.0.": false, "0.1.0": false, "1": false, "": false, "0.0.9x": false, "v0.0.9": false,
	} {
		if got := isLegacyVersion(v); got != want {
			t.Errorf("isLegacyVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestFileURIPath(t *testing.T) {
	tests := []struct {
		uri, want string
		ok        bool
	}{
		{"file:///work/proj/a.txt", "/work/proj/a.txt", true},
		{"file://localhost/work/a%20b.txt", "/work/a b.txt", true},
		{"FILE:///x", "/x", true},
		{"file://server/share/x", "", false},
		{"https://example.com/a", "", false},
		{"file:", "", false},
		{"zed:///agent/thread/1", "", false},
	}
	for _, tt := range tests {
		got, ok := fileURIPath(tt.uri)
		if got != tt.want || ok != tt.ok {
			t.Errorf("fileURIPath(%q) = %q, %v; want %q, %v", tt.uri, got, ok, tt.want, tt.ok)
		}
	}
}

// session/new without the session id the engine mints is an engine bug; the
// transcript runner always sets Msg.Session, so this is checked directly.
func TestSessionNewWithoutEngineSessionID(t *testing.T) {
	tr := newTranslator(DefaultProtocolVersion)
	tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: json.RawMessage(`{}`)})
	tr.FromAgent([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"0.0.9","isAuthenticated":true}}`))
	outs, err := tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 2, Method: "session/new", Body: json.RawMessage(`{"cwd":"/w","mcpServers":[]}`)})
	if err != nil || len(outs) != 1 || outs[0].Kind != translate.Fail || !strings.Contains(string(outs[0].Body), `"code":-32603`) {
		t.Fatalf("session/new without Msg.Session = %+v, %v; want one Fail -32603", outs, err)
	}
}

// fuzzSetup brings a translator to a running prompt.
const fuzzSetup = `
editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"0.0.9","isAuthenticated":true}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/proj","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"go"}]}}
`

// FuzzFromAgent feeds arbitrary frames (one per line; lines starting with
// "editor> " or "event> " are editor inputs) to a translator with a prompt
// running, and fails on a panic, invalid JSON output, or an answer for a Ref
// the editor never sent or had already had answered.
func FuzzFromAgent(f *testing.F) {
	seeds, err := translatetest.AgentLines("testdata/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) < 50 {
		f.Fatalf("only %d seeds from testdata", len(seeds))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// Sequences that reach deeper states: a confirmation answered or
	// cancelled, then the turn's end.
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"requestToolCallConfirmation","params":{"label":"x","icon":"pencil","confirmation":{"type":"edit"}}}
editor> {"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}
{"jsonrpc":"2.0","id":1,"result":null}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"requestToolCallConfirmation","params":{"label":"x","icon":"pencil","confirmation":{"type":"mcp","serverName":"s","toolName":"t","toolDisplayName":"T"}}}
editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}
event> abandon 2
{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"method":"readTextFile","params":{"path":"a"}}
editor> {"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found"}}
{"jsonrpc":"2.0","id":1,"result":null}
editor> {"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"sess-1"}}`))
	translatetest.FuzzAgent(f, Dialect, "", fuzzSetup)
}

func TestPassError(t *testing.T) {
	// Well-formed: passes through, extra members and data included,
	// compacted onto one line (a WebSocket frame may span lines).
	in := "{\"code\": 429,\n \"message\": \"Rate limit exceeded. Try again later.\", \"data\": {\"retry\": 3}, \"x\": 1}"
	if got, want := string(passError(json.RawMessage(in))), `{"code":429,"message":"Rate limit exceeded. Try again later.","data":{"retry":3},"x":1}`; got != want {
		t.Errorf("passError(%s) = %s, want %s", in, got, want)
	}
	// Malformed: a -32603 that says so, the original kept in data.agentError.
	for in, agentError := range map[string]string{
		`{"code":1.5,"message":"m"}`:   `{"code":1.5,"message":"m"}`,
		`{"message":"no code"}`:        `{"message":"no code"}`,
		`{"Code":0,"messAge":"0"}`:     `{"Code":0,"messAge":"0"}`, // keys are exact, unlike encoding/json's
		`"text"`:                       `"text"`,
		`{`:                            `"{"`,
		`{"code":"E42","message":"w"}`: `{"code":"E42","message":"w"}`,
	} {
		got := passError(json.RawMessage(in))
		if gjson.GetBytes(got, "code").Int() != -32603 || !strings.Contains(gjson.GetBytes(got, "message").Str, "malformed error object") ||
			gjson.GetBytes(got, "data.agentError").Raw != agentError {
			t.Errorf("passError(%s) = %s", in, got)
		}
	}
}

// TestFromAgent_deepFrames: a hostile agent's deeply nested frame is refused
// with -32700, not a fatal stack overflow.
func TestFromAgent_deepFrames(t *testing.T) {
	translatetest.CheckDeepFrames(t, Dialect, fuzzSetup)
}
