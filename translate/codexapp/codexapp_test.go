package codexapp

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"golang.org/x/tools/txtar"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func TestTranscripts(t *testing.T) {
	translatetest.Run(t, Dialect, "testdata/*.txtar")
}

func TestDialect(t *testing.T) {
	if Dialect.Name != "codex-app-server" || Dialect.PerSession || Dialect.NoControlLink || Dialect.Relay || Dialect.Configure == nil || Dialect.Summary == "" {
		t.Errorf("Dialect = %+v, want codex-app-server, one link for every session, with Configure and Summary", Dialect)
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name, src string
		want      Options
		wantDiag  string
	}{
		{"no block", "-", Options{}, ""},
		{"all", "model = \"gpt-5-codex\"\nmode = \"full-access\"\n", Options{Model: "gpt-5-codex", Mode: "full-access"}, ""},
		{"bad mode", `mode = "yolo"`, Options{}, `codex.hcl:1,8-14: Invalid mode`},
		{"unknown key", "sandbox = \"x\"\n", Options{}, `Unsupported argument`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body hcl.Body
			if tt.src != "-" {
				f, diags := hclparse.NewParser().ParseHCL([]byte(tt.src), "codex.hcl")
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				body = f.Body
			}
			newTr, diags := Dialect.Configure(body)
			if tt.wantDiag != "" {
				if !strings.Contains(diags.Error(), tt.wantDiag) {
					t.Fatalf("diagnostics = %q, want %q", diags.Error(), tt.wantDiag)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := newTr().(*translator).opts; got != tt.want {
				t.Errorf("options = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHunks(t *testing.T) {
	diff := "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -10,2 +10,3 @@\n x\n+y\n z\n\\ No newline at end of file\n"
	o, n := hunks(diff)
	if o != "a\nb\nc\n\nx\nz\n" || n != "a\nB\nc\n\nx\ny\nz\n" {
		t.Errorf("hunks = %q, %q", o, n)
	}
	if o, n := hunks("not a diff"); o != "" || n != "not a diff" {
		t.Errorf("hunks of no diff = %q, %q", o, n)
	}
}

func TestIsoTime(t *testing.T) {
	if got := isoTime(1796553844); got != "2026-12-06T10:44:04Z" {
		t.Errorf("isoTime = %s", got)
	}
}

// fuzzSetup opens a session and leaves a prompt running, so that fuzzed
// frames reach the turn's states.
const fuzzSetup = `editor> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
agent> {"id":1,"result":{"userAgent":"x/0.169.0"}}
agent> {"id":2,"result":{"account":null,"requiresOpenaiAuth":false}}
agent> {"id":3,"result":{"data":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"id":4,"result":{"thread":{"id":"th"},"model":"m","approvalPolicy":"on-request","sandbox":{"type":"readOnly"}}}
editor> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"th","prompt":[{"type":"text","text":"hi"}]}}
agent> {"id":5,"result":{"turn":{"id":"tu","status":"inProgress"}}}
`

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
	// Deeper states: an approval answered, withdrawn by Codex, a cancel,
	// a refused interrupt, the turn's end.
	f.Add([]byte(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th","turnId":"tu","itemId":"c","command":"ls","availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}]}}` + "\n" +
		"editor> {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"approved-for-session\"}}}\n" +
		`{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu","status":"completed"}}}`))
	f.Add([]byte(`{"method":"item/fileChange/requestApproval","id":"x","params":{"threadId":"th","turnId":"tu","itemId":"f"}}` + "\n" +
		`{"method":"serverRequest/resolved","params":{"threadId":"th","requestId":"x"}}` + "\n" +
		"editor> {\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"th\"}}\n" +
		`{"id":6,"error":{"code":-32600,"message":"no active turn to interrupt"}}` + "\n" +
		`{"method":"item/agentMessage/delta","params":{"threadId":"th","turnId":"tu","itemId":"m","delta":"late"}}`))
	f.Add([]byte(`{"method":"item/started","params":{"threadId":"th","turnId":"tu","item":{"type":"fileChange","id":"f","changes":[{"path":"p","kind":{"type":"update","move_path":"q"},"diff":"@@ -1 +1 @@\n-a\n+b\n"}],"status":"inProgress"}}}` + "\n" +
		`{"method":"item/completed","params":{"threadId":"th","turnId":"tu","item":{"type":"mcpToolCall","id":"m","server":"s","tool":"t","arguments":[1],"result":{"content":[{"type":"text","text":"x"}]},"error":{"message":7},"status":"failed"}}}` + "\n" +
		`{"method":"turn/plan/updated","params":{"threadId":"th","turnId":"tu","plan":[{"step":"a","status":"inProgress"},{"step":1}]}}` + "\n" +
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"th","turnId":"tu","tokenUsage":{"total":{"totalTokens":-1},"last":{"totalTokens":"x"},"modelContextWindow":1e400}}}` + "\n" +
		`{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu","status":"failed","error":{"message":"boom","codexErrorInfo":{"unauthorized":{}}}}}}`))
	f.Add([]byte("event> abandon 3\n" + `{"method":"item/completed","params":{"threadId":"th","turnId":"tu","item":{"type":"agentMessage","id":"m","text":"late"}}}`))
	translatetest.FuzzAgent(f, Dialect, "", fuzzSetup)
}

// A session closed during a turn is kept only for its turn's interrupt
// (testdata/close.txtar): once Codex accepts the interrupt nothing of it
// is left, even when the unsubscribed thread sends no turn/completed.
func TestClosedSessionsAreLetGo(t *testing.T) {
	data, err := os.ReadFile("testdata/close.txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, withCompleted := range []bool{true, false} {
		dr, err := translatetest.NewDriver(Dialect, nil, "close.txtar")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range txtar.Parse(data).Files {
			if f.Name != "transcript" {
				continue
			}
			for _, l := range strings.Split(string(f.Data), "\n") {
				if !strings.HasPrefix(l, "editor> ") && !strings.HasPrefix(l, "agent> ") {
					continue
				}
				if !withCompleted && strings.Contains(l, `"method":"turn/completed"`) {
					continue
				}
				if _, err := dr.Feed(l); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := len(dr.Translator().(*translator).closing); n != 0 {
			t.Errorf("turn/completed sent: %v; %d closed sessions still kept after their interrupts were accepted", withCompleted, n)
		}
	}
}
