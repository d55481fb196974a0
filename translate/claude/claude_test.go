package claude

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func TestTranscripts(t *testing.T) {
	translatetest.Run(t, Dialect, "testdata/*.txtar")
}

func TestDialect(t *testing.T) {
	if Dialect.Name != "claude-stream-json" || !Dialect.PerSession || !Dialect.NoControlLink || Dialect.Relay || Dialect.Configure == nil || Dialect.Summary == "" {
		t.Errorf("Dialect = %+v, want claude-stream-json, PerSession, NoControlLink, with Configure and Summary", Dialect)
	}
	newTr, diags := Dialect.Configure(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, ok := newTr().(translate.SpawnBuilder); !ok {
		t.Error("the translator does not build its CLI's command line (translate.SpawnBuilder)")
	}
}

// configured returns a translator for the options block src (nil: none).
func configured(t *testing.T, src []byte) (*translator, hcl.Diagnostics) {
	t.Helper()
	var body hcl.Body
	if src != nil {
		f, diags := hclparse.NewParser().ParseHCL(src, "claude.hcl")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		body = f.Body
	}
	newTr, diags := Dialect.Configure(body)
	if diags.HasErrors() {
		return nil, diags
	}
	return newTr().(*translator), diags
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name     string
		src      string // "-" = no options block
		want     Options
		wantDiag string
	}{
		{"no block", "-", Options{}, ""},
		{"empty block", "", Options{}, ""},
		{"all", "model = \"opus\"\npermission_mode = \"acceptEdits\"\nmodels = [\"opus\", \"sonnet\"]\nextra_args = [\"--max-turns\", \"5\"]\n",
			Options{Model: "opus", PermissionMode: "acceptEdits", Models: []string{"opus", "sonnet"}, ExtraArgs: []string{"--max-turns", "5"}}, ""},
		{"bad mode", `permission_mode = "yolo"`, Options{}, `claude.hcl:1,19-25: Invalid permission_mode`},
		{"unknown key", "executable = \"x\"\n", Options{}, `claude.hcl:1,1-11: Unsupported argument`},
		{"wrong type", "extra_args = \"--x\"\n", Options{}, `claude.hcl:1,15-18: Unsuitable value type`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src []byte
			if tt.src != "-" {
				src = []byte(tt.src)
			}
			tr, diags := configured(t, src)
			if tt.wantDiag != "" {
				if !strings.Contains(diags.Error(), tt.wantDiag) {
					t.Fatalf("diagnostics = %q, want %q", diags.Error(), tt.wantDiag)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			got := tr.opts
			if got.Model != tt.want.Model || got.PermissionMode != tt.want.PermissionMode ||
				!slices.Equal(got.Models, tt.want.Models) || !slices.Equal(got.ExtraArgs, tt.want.ExtraArgs) {
				t.Errorf("options = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSessionUUID(t *testing.T) {
	a, b := SessionUUID("sess-1"), SessionUUID("sess-2")
	if a == b || a != SessionUUID("sess-1") {
		t.Errorf("SessionUUID(sess-1) = %s, (sess-2) = %s: want distinct and stable", a, b)
	}
	if !isUUID(a) || a[14] != '5' || !strings.ContainsRune("89ab", rune(a[19])) {
		t.Errorf("SessionUUID(sess-1) = %s, want a version 5, RFC 9562 variant UUID", a)
	}
	// Pinned (Python: uuid.uuid5(uuid.NAMESPACE_URL,
	// "acp-bridge:claude:sess-1")): a session created by one bridge
	// version must be resumable by the next.
	if want := "9d2e41de-d2f6-5582-9262-06a756a5b1e5"; a != want {
		t.Errorf("SessionUUID(sess-1) = %s, want %s", a, want)
	}
	const u = "7B47FA40-0000-4000-8000-0123456789AB"
	if got := SessionUUID(u); got != strings.ToLower(u) {
		t.Errorf("SessionUUID(%s) = %s, want the UUID itself", u, got)
	}
	for _, s := range []string{"", "7b47fa40-0000-4000-8000-0123456789a", "7b47fa40x0000-4000-8000-0123456789ab", "g7b47fa4-0000-4000-8000-0123456789ab"} {
		if isUUID(s) {
			t.Errorf("isUUID(%q) = true", s)
		}
	}
}

func TestBuildSpawn(t *testing.T) {
	tests := []struct {
		name    string
		options string
		method  string
		session string
		params  string
		want    []string // after StreamFlags
		cwd     string
		wantErr string
	}{
		{
			name: "new", method: "session/new", session: "sess-1",
			params: `{"cwd":"/home/dev/ws","mcpServers":[]}`,
			want:   []string{"--session-id", SessionUUID("sess-1")}, cwd: "/home/dev/ws",
		},
		{
			name:    "options, MCP servers and directories",
			options: "model = \"opus\"\npermission_mode = \"plan\"\nextra_args = [\"--max-turns\", \"20\"]\n",
			method:  "session/new", session: "sess-2",
			params: `{"cwd":"/w/./p","mcpServers":[` +
				`{"name":"files","command":"/bin/mcp-files","args":["--root","/w"],"env":[{"name":"TOKEN","value":"t<1>"}]},` +
				`{"type":"http","name":"web","url":"https://mcp.example/x","headers":[{"name":"Authorization","value":"Bearer y"}]},` +
				`{"type":"sse","name":"old","url":"https://mcp.example/sse","headers":[]}],` +
				`"additionalDirectories":["/w/lib","/w/docs"]}`,
			want: []string{"--model", "opus", "--permission-mode", "plan", "--session-id", SessionUUID("sess-2"),
				"--mcp-config", `{"mcpServers":{"files":{"type":"stdio","command":"/bin/mcp-files","args":["--root","/w"],"env":{"TOKEN":"t<1>"}},"old":{"type":"sse","url":"https://mcp.example/sse","headers":{}},"web":{"type":"http","url":"https://mcp.example/x","headers":{"Authorization":"Bearer y"}}}}`,
				"--add-dir", "/w/lib", "--add-dir", "/w/docs", "--max-turns", "20"},
			cwd: "/w/p",
		},
		{
			name: "load resumes the CLI session of the ACP id", method: "session/load", session: "sess-1",
			params: `{"sessionId":"sess-1","cwd":"/w","mcpServers":[]}`,
			want:   []string{"--resume", SessionUUID("sess-1")}, cwd: "/w",
		},
		{
			name: "resume of a CLI session id", method: "session/resume", session: "7b47fa40-0000-4000-8000-0123456789ab",
			params: `{"sessionId":"7b47fa40-0000-4000-8000-0123456789ab","cwd":"/w"}`,
			want:   []string{"--resume", "7b47fa40-0000-4000-8000-0123456789ab"}, cwd: "/w",
		},
		{name: "relative cwd", method: "session/new", session: "s", params: `{"cwd":"w","mcpServers":[]}`, wantErr: "cwd must be an absolute path"},
		{name: "MCP server without command", method: "session/new", session: "s", params: `{"cwd":"/w","mcpServers":[{"name":"x","args":[],"env":[]}]}`, wantErr: "mcpServers[0] (x) has no command"},
		{name: "MCP over ACP", method: "session/new", session: "s", params: `{"cwd":"/w","mcpServers":[{"type":"acp","name":"x","serverId":"1"}]}`, wantErr: `transport "acp"`},
		{name: "duplicate MCP names", method: "session/new", session: "s", params: `{"cwd":"/w","mcpServers":[{"name":"x","command":"/a","args":[],"env":[]},{"name":"x","command":"/b","args":[],"env":[]}]}`, wantErr: `two servers named "x"`},
		{name: "not a session request", method: "session/prompt", session: "s", params: `{"cwd":"/w"}`, wantErr: "does not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src []byte
			if tt.options != "" {
				src = []byte(tt.options)
			}
			tr, diags := configured(t, src)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			sp, err := tr.BuildSpawn(translate.Msg{Kind: translate.Request, Ref: 1, Method: tt.method, Session: tt.session, Body: json.RawMessage(tt.params)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("BuildSpawn error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(StreamFlags), tt.want...)
			if !slices.Equal(sp.Argv, want) || !sp.Append || sp.Cwd != tt.cwd || sp.Env != nil {
				t.Errorf("BuildSpawn = %q (append %v, cwd %q, env %q)\nwant %q (append, cwd %q)", sp.Argv, sp.Append, sp.Cwd, sp.Env, want, tt.cwd)
			}
		})
	}
}

// fuzzSetup brings a translator to a running prompt with a permission
// request pending.
const fuzzSetup = `
editor> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"type":"control_response","response":{"subtype":"success","request_id":"req_1","response":{"commands":[]}}}
editor> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"go"}]}}
agent> {"type":"control_request","request_id":"c-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}}
`

// FuzzFromAgent feeds arbitrary CLI lines (one per line; lines starting
// with "editor> " or "event> " are editor inputs) to a translator with a
// prompt running, and fails on a panic, invalid or multi-line JSON output,
// a malformed session/update, or an answer for a Ref the editor never sent
// or had already had answered: the stream-json decoder and everything
// behind it must take whatever a CLI writes.
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
	// Sequences that reach deeper states: the permission answered or
	// withdrawn, a cancel, the turn's end.
	f.Add([]byte("editor> {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"allow_always\"}}}\n" +
		`{"type":"result","subtype":"success","is_error":false}`))
	f.Add([]byte(`{"type":"control_cancel_request","request_id":"c-1"}` + "\n" +
		"editor> {\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"sess-1\"}}\n" +
		`{"type":"control_response","response":{"subtype":"success","request_id":"req_2"}}` + "\n" +
		`{"type":"result","subtype":"error_during_execution","is_error":false}`))
	f.Add([]byte("event> abandon 3\n" + `{"type":"result","subtype":"success","is_error":true,"result":"API Error"}`))
	f.Add([]byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"\u0000\n"}}}`))
	// Claude Code 2.1 shapes: usage on assistant messages (odd numbers
	// too), context windows in the result, compaction, messages between a
	// tool result and the next assistant message.
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"../x","offset":-3,"limit":1e30}}],"usage":{"input_tokens":-5,"cache_read_input_tokens":9223372036854775807,"output_tokens":"x"}},"parent_tool_use_id":null}` + "\n" +
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"` + "```" + `x"}],"is_error":true}]}}` + "\n" +
		`{"type":"system","subtype":"informational","content":"done","level":"info"}` + "\n" +
		`{"type":"result","subtype":"success","is_error":false,"total_cost_usd":"free","modelUsage":{"a":{"contextWindow":0},"b":{"contextWindow":-1},"c":null},"usage":{"input_tokens":1e400}}`))
	f.Add([]byte(`{"type":"system","subtype":"status","status":"compacting"}` + "\n" +
		`{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":1}}` + "\n" +
		`{"type":"system","subtype":"session_state_changed","state":"idle"}` + "\n" +
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}` + "\n" +
		`{"type":"result","subtype":"success","is_error":false,"stop_reason":"max_tokens","modelUsage":[],"usage":[]}`))
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Grep","input":{"pattern":"\"","-A":{},"head_limit":[1],"glob":"*"}},{"type":"tool_use","id":"t2","name":"WebSearch","input":{"allowed_domains":[1,null]}}]}}`))
	translatetest.FuzzAgent(f, Dialect, "", fuzzSetup)
}

// decode is the stream-json line decoder every CLI line goes through.
func FuzzDecode(f *testing.F) {
	seeds, _ := translatetest.AgentLines("testdata/*.txtar")
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		msg, err := decode(line)
		if err != nil {
			return
		}
		if !msg.IsObject() || msg.Get("type").Str == "" {
			t.Fatalf("decode(%q) accepted a line that is not an object with a type", line)
		}
		if !json.Valid(line) {
			t.Fatalf("decode(%q) accepted invalid JSON", line)
		}
	})
}
