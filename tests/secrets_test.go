package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/tidwall/gjson"
)

// A token must not leak: an agent that refuses the WebSocket handshake and
// echoes the Authorization value in its 401 body used to put the token in
// the log at the default level and in the editor's error. Every configured
// secret is scrubbed from both.
func TestSecrets_EchoedTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	const canary = "canary-7f3a9c21e0"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp"
	b := StartBridge(t, []string{"--url", url, "--header", "Authorization=ACP_TEST_TOKEN", "--log-level", "trace"},
		[]string{"ACP_TEST_TOKEN=Bearer " + canary}, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	l := b.Next(WaitTimeout)
	msg := l.Get("error.message").Str
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "<redacted>") {
		t.Errorf("initialize answered %s, want the refusal with the token redacted", l)
	}
	b.In.Close()
	b.WaitExit(WaitTimeout)
	for _, line := range b.Out.Lines() {
		if strings.Contains(string(line.Raw), canary) {
			t.Errorf("the token reached the editor's stream: %s", line)
		}
	}
	if strings.Contains(b.Stderr(), canary) {
		t.Errorf("the token reached the log:\n%s", b.Stderr())
	}
}

// secretAnchor is the part of the test tokens no encoding rewrites: any
// form of the token that leaks, whole or in part, carries it.
const secretAnchor = "Zq9canary"

// noSecret fails the test if text, from where, holds any form of a token.
func noSecret(t *testing.T, where, text, anchor string) {
	t.Helper()
	if i := strings.Index(text, anchor); i >= 0 {
		t.Errorf("a token reached %s: …%s…", where, text[max(0, i-80):min(len(text), i+80)])
	}
}

// viewOf renders the trace at path with `trace view` and returns the page.
func viewOf(t *testing.T, path string) string {
	t.Helper()
	out := path + ".html"
	cmd := exec.Command(BridgeBin, "trace", "view", path, "-o", out)
	cmd.Env = hermeticEnv(t, nil)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("trace view: %v\n%s", err, b)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(page)
}

// A URL query token travels URL-encoded: a 401 body that echoes the
// request URI carries it with "+" for a space and %2B, %2F … (upper- or
// lower-case hex), and the body may be JSON, which escapes it again. None
// of it may reach the editor's error, the log in either format, the trace
// or its HTML view.
func TestSecrets_URLEncodedQueryTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	const token = "p+q/" + secretAnchor + " x&y=é"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]string{"error": "no session for " + r.RequestURI, "lower": strings.ToLower(r.URL.RawQuery)})
		http.Error(w, "401 for "+r.RequestURI+" "+string(body), http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close) // after the parallel subtests
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp?token=" + neturl.QueryEscape(token) + "&v=1"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "trace.ndjson")
			b := StartBridge(t, []string{"--url", url, "--log-level", "trace", "--log-format", format, "--trace", path}, nil, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
			l := b.Next(WaitTimeout)
			msg := l.Get("error.message").Str
			if !strings.Contains(msg, "401") || !strings.Contains(msg, "<redacted>") {
				t.Errorf("initialize answered %s, want the refusal with the token redacted", l)
			}
			stopBridge(t, b)
			for _, line := range b.Out.Lines() {
				noSecret(t, "the editor", string(line.Raw), secretAnchor)
			}
			noSecret(t, "the log", b.Stderr(), secretAnchor)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			noSecret(t, "the trace", string(data), secretAnchor)
			if !strings.Contains(string(data), "401") {
				t.Errorf("the trace never recorded the refusal; the check proves nothing:\n%s", data)
			}
			noSecret(t, "the trace view", viewOf(t, path), secretAnchor)
		})
	}
}

// echoAgent is an ACP agent that answers a prompt with a session/update
// echoing the token it was given, written JSON-escaped with "\/" as PHP
// and some other encoders write it, and raw.
func echoAgent(token string) fakeagent.ServeFunc {
	return func(in io.Reader, out io.Writer, _ fakeagent.Options) error {
		sc := bufio.NewScanner(in)
		sc.Buffer(nil, 1<<20)
		escaped := strings.ReplaceAll(token, "/", `\/`)
		for sc.Scan() {
			msg := sc.Bytes()
			id := gjson.GetBytes(msg, "id").Raw
			var lines []string
			switch gjson.GetBytes(msg, "method").Str {
			case "initialize":
				lines = []string{`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`}
			case "session/new":
				lines = []string{`{"jsonrpc":"2.0","id":` + id + `,"result":{"sessionId":"s1"}}`}
			case "session/prompt":
				lines = []string{
					`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"my token is ` + escaped + `"}}}}`,
					`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"again: ` + token + `"}}}}`,
					`{"jsonrpc":"2.0","id":` + id + `,"result":{"stopReason":"end_turn"}}`,
				}
			default:
				if id != "" {
					lines = []string{`{"jsonrpc":"2.0","id":` + id + `,"result":null}`}
				}
			}
			for _, l := range lines {
				if _, err := io.WriteString(out, l+"\n"); err != nil {
					return err
				}
			}
		}
		return sc.Err()
	}
}

// A header token the agent echoes in a session/update, JSON-escaped or
// raw, reaches neither the editor (docs/guarantees.md's promise: configured
// secrets never reach the log or the editor) nor the trace, the
// trace-level log in either format, or the trace view.
func TestSecrets_TokenEchoedInUpdateNeverLeaks(t *testing.T) {
	t.Parallel()
	const token = "h/" + secretAnchor + "/k9"
	ws := StartWSAgent(t, fakeagent.WSOptions{Serve: echoAgent(token)})
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "trace.ndjson")
			state := t.TempDir()
			// A query value is a secret too, even "true": it is scrubbed
			// from strings only, never from the JSON around them.
			b := StartBridge(t, []string{"--url", ws.URL + "?stream=true", "--header", "Authorization=ACP_TEST_TOKEN", "--log-level", "trace", "--log-format", format, "--trace", path},
				[]string{"ACP_TEST_TOKEN=Bearer " + token, "XDG_STATE_HOME=" + state}, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
			b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"token?"}]}}`)
			if l := b.Out.Response(t, "1"); l.Get("result.agentCapabilities.loadSession").Raw != "true" {
				t.Errorf("initialize answered %s, want loadSession true", l)
			}
			if _, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return l.ID() == "3" }); !ok {
				t.Fatal("the prompt was never answered")
			}
			var chunks []string
			for _, l := range b.Out.Lines() {
				if l.Method() == "session/update" {
					chunks = append(chunks, l.Get("params.update.content.text").Str)
				}
			}
			if want := []string{"my token is <redacted>", "again: <redacted>"}; !slices.Equal(chunks, want) {
				t.Errorf("the editor saw %q, want %q", chunks, want)
			}
			stopBridge(t, b)
			for _, line := range b.Out.Lines() {
				noSecret(t, "the editor", string(line.Raw), secretAnchor)
			}
			noSecret(t, "the log", b.Stderr(), secretAnchor)
			if !strings.Contains(b.Stderr(), "my token is") {
				t.Errorf("the trace-level log never showed the update; the check proves nothing")
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			noSecret(t, "the trace", string(data), secretAnchor)
			noSecret(t, "the trace view", viewOf(t, path), secretAnchor)
			noSecretStored(t, state)
		})
	}
}

// noSecretStored fails the test if any file of the session store in state
// holds any form of the test token, or if no transcript holds the
// scrubbed updates of echoAgent (the check would prove nothing).
func noSecretStored(t *testing.T, state string) {
	t.Helper()
	transcripts := 0
	filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".ndjson") && strings.Contains(string(b), "again: <redacted>") {
			transcripts++
		}
		noSecret(t, "the session store's "+filepath.Base(p), string(b), secretAnchor)
		return nil
	})
	if transcripts != 1 {
		t.Errorf("%d transcripts hold the scrubbed update; want the session's: the check proves nothing", transcripts)
	}
}

// The session's transcript keeps what the editor was shown, scrubbed,
// with the log at trace level (above) or not (here): the same path.
func TestSecrets_TokenEchoedInUpdateNotStored(t *testing.T) {
	t.Parallel()
	const token = "h/" + secretAnchor + "/k9"
	ws := StartWSAgent(t, fakeagent.WSOptions{Serve: echoAgent(token)})
	state := t.TempDir()
	b := StartBridge(t, []string{"--url", ws.URL, "--header", "Authorization=ACP_TEST_TOKEN"},
		[]string{"ACP_TEST_TOKEN=Bearer " + token, "XDG_STATE_HOME=" + state}, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"token?"}]}}`)
	if _, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return l.ID() == "3" }); !ok {
		t.Fatal("the prompt was never answered")
	}
	stopBridge(t, b)
	for _, line := range b.Out.Lines() {
		noSecret(t, "the editor", string(line.Raw), secretAnchor)
	}
	noSecretStored(t, state)
}

// A child that prints its key on stdout (noise the stdout-noise rule
// counts) does not put it in the compliance shim report, in the file or
// on stderr: the first example of each rule is scrubbed before it is cut
// short.
func TestSecrets_ShimReportScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk/" + secretAnchor + "+report"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"report", "report=FILE"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.hcl")
			// The key printed JSON-escaped, as a child logging JSON would.
			script := `printf '{"level":"info","msg":"using key %s"\n' "$(printf %s "$API_KEY" | sed 's,/,\\\\/,g')"; exec "$0"`
			text := fmt.Sprintf("agent \"noisy\" {\n  command = [%q, %q, %q, %q]\n  env = {\n    API_KEY = %q\n    FAKE_AGENT = \"acp\"\n  }\n}\n",
				"sh", "-c", script, exe, key)
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			report := filepath.Join(dir, "report.json")
			arg := "report"
			if mode == "report=FILE" {
				arg = "report=" + report
			}
			b := StartBridge(t, []string{"--config", cfg, "--shim", arg}, nil, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
			if l := b.Next(WaitTimeout); l.Get("error").Exists() {
				t.Fatalf("initialize: %s", l)
			}
			stopBridge(t, b)
			out := b.Stderr()
			if mode == "report=FILE" {
				data, err := os.ReadFile(report)
				if err != nil {
					t.Fatal(err)
				}
				out = string(data)
			}
			if !strings.Contains(out, "using key") {
				t.Fatalf("the report does not show the noise; the check proves nothing:\n%s", out)
			}
			noSecret(t, "the shim report", out, secretAnchor)
			noSecret(t, "the log", b.Stderr(), secretAnchor)
		})
	}
}

// A value a rule profile reads with env() is a secret like a configured
// header: the connect frame that carries it (an API key) reaches no sink
// in any encoding — not the trace, its HTML view, the trace-level log in
// either format, nor the editor. Both a shipped profile (open-interpreter's
// INTERPRETER_API_KEY) and a configuration's dialect block are checked.
func TestSecrets_ProfileEnvNeverLeaks(t *testing.T) {
	t.Parallel()
	const key = `k/` + secretAnchor + `"é+1`
	src, ok := rules.Source("open-interpreter")
	if !ok {
		t.Fatal("no shipped profile open-interpreter")
	}
	user := strings.ReplaceAll(string(src), "INTERPRETER_API_KEY", "JOBQ_TOKEN")
	if user == string(src) {
		t.Fatal("the open-interpreter profile no longer reads INTERPRETER_API_KEY; the check proves nothing")
	}
	cfg := filepath.Join(t.TempDir(), "config.hcl")
	if err := os.WriteFile(cfg, []byte("dialect \"jobq\" {\n"+user+"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := StartWSAgent(t, fakeagent.WSOptions{Serve: fakerules.OpenInterpreter(key)})
	for _, c := range []struct{ name, dialect, env string }{
		{"shipped", "open-interpreter", "INTERPRETER_API_KEY"},
		{"user", "jobq", "JOBQ_TOKEN"},
	} {
		for _, format := range []string{"text", "json"} {
			t.Run(c.name+"/"+format, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "trace.ndjson")
				b := StartBridge(t, []string{"--url", ws.URL, "--dialect", c.dialect, "--config", cfg, "--no-sessions",
					"--log-level", "trace", "--log-format", format, "--trace", path}, []string{c.env + "=" + key}, nil)
				b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
				b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
				l := b.Out.Response(t, "2")
				sid := l.Get("result.sessionId").Str
				if sid == "" {
					t.Fatalf("session/new answered %s", l)
				}
				b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hello there"}]}}`)
				if l := b.Out.Response(t, "3"); l.Get("result.stopReason").Str != "end_turn" {
					t.Fatalf("the prompt was answered %s, want end_turn: the agent took the key, or the check proves nothing", l)
				}
				stopBridge(t, b)
				// The harness copies stderr on its own: the exit can come first.
				waitFor(t, "the log's last line", func() bool { return strings.Contains(b.Stderr(), "bridge stopped") })
				for _, line := range b.Out.Lines() {
					noSecret(t, "the editor", string(line.Raw), secretAnchor)
				}
				noSecret(t, "the log", b.Stderr(), secretAnchor)
				if !strings.Contains(b.Stderr(), "auth") {
					t.Errorf("the trace-level log never showed the connect frame; the check proves nothing:\n%s", b.Stderr())
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				noSecret(t, "the trace", string(data), secretAnchor)
				if !strings.Contains(string(data), "auth") {
					t.Errorf("the trace never recorded the connect frame; the check proves nothing:\n%s", data)
				}
				noSecret(t, "the trace view", viewOf(t, path), secretAnchor)
			})
		}
	}
}
