package tests

// End to end with the real Codex CLI (CodexVersion, tests/codex_cli_test.go)
// behind the built bridge, dialect codex-app-server, on both transports: the
// bridge spawning `codex app-server` (stdio), and the bridge dialling
// `codex app-server --listen ws://…` (WebSocket), which the test then kills
// and restarts to see the bridge reconnect. Codex runs offline against the
// fake Responses API (tests/fakeresponses). Every message the bridge sends
// to Codex (read back from its --trace) is validated against the JSON Schema
// that Codex CLI generates (translate/codexapp/testdata/schema).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeresponses"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

// codexWait bounds each call to a real Codex: it starts in about a second
// on an idle machine, several on two busy cores.
const codexWait = 90 * time.Second

func ctxCodex(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), codexWait)
	t.Cleanup(cancel)
	return ctx
}

// wsCodex is `codex app-server --listen ws://127.0.0.1:PORT`, restartable
// on the same port.
type wsCodex struct {
	t        *testing.T
	bin, url string
	env      []string
	cwd      string
	cmd      *exec.Cmd
}

var listening = regexp.MustCompile(`listening on: (ws://[0-9.]+:[0-9]+)`)

func startWSCodex(t *testing.T, bin string, env []string, cwd, addr string) *wsCodex {
	t.Helper()
	w := &wsCodex{t: t, bin: bin, env: env, cwd: cwd}
	w.start(addr)
	t.Cleanup(w.stop)
	return w
}

func (w *wsCodex) start(addr string) {
	w.t.Helper()
	cmd := exec.Command(w.bin, "app-server", "--listen", "ws://"+addr)
	cmd.Env = append(os.Environ(), w.env...)
	cmd.Dir = w.cwd
	stderr, err := cmd.StderrPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.cmd = cmd
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case w.url = <-found:
	case <-time.After(codexWait):
		w.t.Fatalf("codex app-server --listen ws://%s did not say where it listens within %s", addr, codexWait)
	}
}

func (w *wsCodex) stop() {
	if w.cmd != nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		w.cmd = nil
	}
}

// restart kills the app-server and starts a new one on the same address.
func (w *wsCodex) restart() {
	w.t.Helper()
	w.stop()
	addr := strings.TrimPrefix(w.url, "ws://")
	// The port is free again once the old process is gone.
	for i := 0; i < 50; i++ {
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.start(addr)
}

// codexSetup is one real Codex behind a bridge, either transport.
type codexSetup struct {
	api   *fakeresponses.Server
	env   []string
	cwd   string
	trace string
	ws    *wsCodex
	args  []string
}

func newCodexSetup(t *testing.T, transport string) *codexSetup {
	t.Helper()
	bin := CodexCLI(t)
	api, env := codexEnv(t)
	s := &codexSetup{api: api, env: env, cwd: t.TempDir(), trace: filepath.Join(t.TempDir(), "trace.ndjson")}
	s.args = []string{"--trace", s.trace, "--dialect", "codex-app-server"}
	switch transport {
	case "stdio":
		s.args = append(s.args, "--", bin, "app-server")
	case "ws":
		s.ws = startWSCodex(t, bin, env, s.cwd, "127.0.0.1:0")
		s.args = append(s.args, "--url", s.ws.url)
	}
	return s
}

func (s *codexSetup) editor(t *testing.T) *Editor {
	t.Helper()
	tr := Transport{Name: "codex", Start: func(*testing.T) Agent { return Agent{Args: s.args, Env: s.env} }}
	e := NewEditor(t, tr, EditorOptions{NoFS: true, NoTerminal: true})
	t.Cleanup(func() {
		if t.Failed() {
			tr, _ := os.ReadFile(s.trace)
			t.Logf("bridge stderr:\n%s\nAPI requests:\n%s\ntrace:\n%s", tail(e.Stderr(), 8<<10), strings.Join(s.api.Log(), "\n"), tail(string(tr), 24<<10))
		}
	})
	return e
}

// texts joins the session's chunks of one kind.
func codexTexts(e *Editor, sid acp.SessionId, kind string) string {
	var b strings.Builder
	for _, u := range e.Fake.Updates(sid) {
		switch {
		case kind == "agent_message_chunk" && u.Update.AgentMessageChunk != nil && u.Update.AgentMessageChunk.Content.Text != nil:
			b.WriteString(u.Update.AgentMessageChunk.Content.Text.Text)
		case kind == "agent_thought_chunk" && u.Update.AgentThoughtChunk != nil && u.Update.AgentThoughtChunk.Content.Text != nil:
			b.WriteString(u.Update.AgentThoughtChunk.Content.Text.Text)
		case kind == "user_message_chunk" && u.Update.UserMessageChunk != nil && u.Update.UserMessageChunk.Content.Text != nil:
			b.WriteString(u.Update.UserMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}

// The whole dialect against a real Codex, on each transport: modes and
// models, streamed text and thoughts, usage, a command Codex asks to run
// (allowed: it runs), apply_patch as a file change with its diff, a failed
// model request as the prompt's error, a cancelled turn; over WebSocket the
// app-server is then restarted and the session goes on; over stdio a second
// bridge loads the session and replays it. Every frame the bridge sent Codex
// is valid against Codex's own schema.
func TestCodex_RealCLI(t *testing.T) {
	for _, transport := range []string{"stdio", "ws"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			testCodexRealCLI(t, transport)
		})
	}
}

func testCodexRealCLI(t *testing.T, transport string) {
	s := newCodexSetup(t, transport)
	e := s.editor(t)
	init := e.Initialize(t)
	if init.ProtocolVersion != 1 || !init.AgentCapabilities.LoadSession || init.AgentCapabilities.SessionCapabilities.Resume == nil {
		t.Errorf("initialize = %+v, want v1 with loadSession and resume", init)
	}
	ns, err := e.Conn.NewSession(ctxCodex(t), acp.NewSessionRequest{Cwd: s.cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	sid := ns.SessionId
	var modes []string
	for _, m := range ns.Modes.AvailableModes {
		modes = append(modes, string(m.Id))
	}
	if !slices.Equal(modes, []string{"read-only", "auto", "full-access"}) || ns.Modes.CurrentModeId != "read-only" {
		t.Errorf("modes %q current %q, want read-only, auto, full-access, current read-only (config.toml's sandbox)", modes, ns.Modes.CurrentModeId)
	}
	if ns.Models == nil || len(ns.Models.AvailableModels) < 2 || ns.Models.CurrentModelId != "gpt-fake" {
		t.Errorf("models = %+v, want Codex's list and the configured gpt-fake current", ns.Models)
	}

	prompt := func(text string) (acp.PromptResponse, error) {
		return e.Conn.Prompt(ctxCodex(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	}
	r, err := prompt("think, then say hello")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("hello: %+v, %v; want end_turn", r, err)
	}
	// Codex's warning that gpt-fake has no model metadata comes first, as
	// a message (as codex-acp shows it).
	if got := codexTexts(e, sid, "agent_message_chunk"); !strings.HasSuffix(got, fakeresponses.Hello) || !strings.HasPrefix(got, "Model metadata for `gpt-fake`") {
		t.Errorf("message %q, want Codex's warning, then %q", got, fakeresponses.Hello)
	}
	if got := codexTexts(e, sid, "agent_thought_chunk"); got != fakeresponses.Thought {
		t.Errorf("thoughts %q, want %q", got, fakeresponses.Thought)
	}
	if r.Usage == nil || r.Usage.TotalTokens != 110 {
		t.Errorf("prompt usage = %+v, want the fake API's 110 tokens", r.Usage)
	}

	r, err = prompt("run the tool")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("run: %+v, %v; want end_turn", r, err)
	}
	if _, err := os.Stat(filepath.Join(s.cwd, fakeresponses.RunFile)); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	perms := e.Fake.Permissions()
	if len(perms) != 1 || perms[0].ToolCall.ToolCallId == "" {
		t.Fatalf("permission requests %+v, want one for the command", perms)
	}
	var lifecycle []string
	for _, u := range e.Fake.Updates(sid) {
		if tc := u.Update.ToolCall; tc != nil && tc.ToolCallId == perms[0].ToolCall.ToolCallId {
			lifecycle = append(lifecycle, "tool_call "+string(tc.Kind)+" "+string(tc.Status))
		}
		if tc := u.Update.ToolCallUpdate; tc != nil && tc.ToolCallId == perms[0].ToolCall.ToolCallId && tc.Status != nil {
			lifecycle = append(lifecycle, "update "+string(*tc.Status))
		}
	}
	if !slices.Equal(lifecycle, []string{"tool_call execute in_progress", "update completed"}) {
		t.Errorf("command lifecycle %q, want a tool_call then its completion", lifecycle)
	}

	r, err = prompt("patch a file")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("patch: %+v, %v; want end_turn", r, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.cwd, fakeresponses.PatchFile)); err != nil || !strings.Contains(string(b), fakeresponses.PatchLine) {
		t.Errorf("the patch was not applied: %q, %v", b, err)
	}
	sawDiff := false
	for _, u := range e.Fake.Updates(sid) {
		if tc := u.Update.ToolCall; tc != nil && tc.Kind == acp.ToolKindEdit {
			for _, c := range tc.Content {
				sawDiff = sawDiff || (c.Diff != nil && strings.HasSuffix(c.Diff.Path, fakeresponses.PatchFile) && c.Diff.NewText == fakeresponses.PatchLine+"\n")
			}
		}
	}
	if !sawDiff {
		t.Errorf("no edit tool_call with the added file's diff")
	}

	_, err = prompt("fail please")
	if err == nil || !strings.Contains(err.Error(), fakeresponses.FailMessage) {
		t.Errorf("fail: error %v, want the model's words %q", err, fakeresponses.FailMessage)
	}

	done := make(chan struct{})
	var cr acp.PromptResponse
	var cerr error
	go func() { defer close(done); cr, cerr = prompt("slow") }()
	waitUntil(t, codexWait, "the slow turn's first words", func() bool {
		return strings.HasSuffix(codexTexts(e, sid, "agent_message_chunk"), "Working")
	})
	if err := e.Conn.Cancel(ctxCodex(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	<-done
	if cerr != nil || cr.StopReason != acp.StopReasonCancelled {
		t.Errorf("cancelled prompt: %+v, %v; want cancelled", cr, cerr)
	}

	switch transport {
	case "ws":
		// The app-server goes away and comes back: the bridge dials it
		// again and resumes the thread for the next prompt.
		s.ws.restart()
		var err error
		for i := 0; i < 3; i++ {
			if r, err = prompt("say hello again"); err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond) // the link may still be going down
		}
		if err != nil || r.StopReason != acp.StopReasonEndTurn {
			t.Errorf("after the app-server restarted: %+v, %v; want end_turn on the same session", r, err)
		}
	case "stdio":
		// A second bridge (and Codex) loads the session and replays it,
		// once the first has let go of the thread.
		e.Bridge.In.Close()
		e.WaitExit(codexWait)
		s2 := *s
		s2.trace = filepath.Join(t.TempDir(), "trace2.ndjson")
		s2.args = slices.Clone(s.args)
		s2.args[1] = s2.trace
		e2 := s2.editor(t)
		e2.Initialize(t)
		if _, err := e2.Conn.LoadSession(ctxCodex(t), acp.LoadSessionRequest{SessionId: sid, Cwd: s.cwd, McpServers: []acp.McpServer{}}); err != nil {
			t.Fatalf("session/load: %v", err)
		}
		if got := codexTexts(e2, sid, "user_message_chunk"); !strings.Contains(got, "think, then say hello") || !strings.Contains(got, "run the tool") {
			t.Errorf("load replayed the user's messages %q, want the session's prompts", got)
		}
		if got := codexTexts(e2, sid, "agent_message_chunk"); !strings.Contains(got, fakeresponses.Hello) {
			t.Errorf("load replayed the agent's messages %q, want %q", got, fakeresponses.Hello)
		}
		e2.Bridge.In.Close()
		e2.WaitExit(codexWait)
		validateCodexTrace(t, s2.trace)
	}
	e.Bridge.In.Close()
	e.WaitExit(codexWait)
	validateCodexTrace(t, s.trace)
}

// codexSchema is the app-server's schema as Codex CLI generates it.
type codexSchema struct {
	request, notification *jsonschema.Schema
	responses             map[string]*jsonschema.Schema // by the server request's method
}

var (
	codexSchemaOnce sync.Once
	codexSchemaVal  *codexSchema
	codexSchemaErr  error
)

func loadCodexSchema() (*codexSchema, error) {
	codexSchemaOnce.Do(func() {
		dir := filepath.Join("..", "translate", "codexapp", "testdata", "schema")
		c := jsonschema.NewCompiler()
		compile := func(file string) *jsonschema.Schema {
			if codexSchemaErr != nil {
				return nil
			}
			f, err := os.Open(filepath.Join(dir, file))
			if err != nil {
				codexSchemaErr = err
				return nil
			}
			defer f.Close()
			doc, err := jsonschema.UnmarshalJSON(f)
			if err != nil {
				codexSchemaErr = fmt.Errorf("%s: %w", file, err)
				return nil
			}
			if err := c.AddResource(file, doc); err != nil {
				codexSchemaErr = err
				return nil
			}
			sch, err := c.Compile(file)
			if err != nil {
				codexSchemaErr = fmt.Errorf("%s: %w", file, err)
			}
			return sch
		}
		s := &codexSchema{responses: map[string]*jsonschema.Schema{}}
		s.request = compile("ClientRequest.json")
		s.notification = compile("ClientNotification.json")
		s.responses["item/commandExecution/requestApproval"] = compile("CommandExecutionRequestApprovalResponse.json")
		s.responses["item/fileChange/requestApproval"] = compile("FileChangeRequestApprovalResponse.json")
		codexSchemaVal = s
	})
	return codexSchemaVal, codexSchemaErr
}

// validateCodexTrace checks every message the bridge sent Codex, as its
// trace recorded it, against Codex's schema: requests and notifications as
// ClientRequest and ClientNotification, answers to Codex's approval
// requests as their response types, errors as JSON-RPC errors.
func validateCodexTrace(t *testing.T, path string) {
	t.Helper()
	sch, err := loadCodexSchema()
	if err != nil {
		t.Fatalf("codex schema: %v", err)
	}
	recs, err := trace.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	asked := map[string]string{} // Codex's request id → method
	sent := 0
	for _, r := range recs {
		if r.Hop != "agent" {
			continue
		}
		m := gjson.ParseBytes(r.Msg)
		if r.Dir == "in" {
			if m.Get("method").Exists() && m.Get("id").Exists() {
				asked[m.Get("id").Raw] = m.Get("method").Str
			}
			continue
		}
		sent++
		if m.Get("jsonrpc").Exists() {
			t.Errorf("a frame to Codex has a jsonrpc member, which the app-server does not use: %s", r.Msg)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(r.Msg)))
		if err != nil {
			t.Errorf("frame to Codex is not JSON: %s", r.Msg)
			continue
		}
		var target *jsonschema.Schema
		what := ""
		switch {
		case m.Get("method").Exists() && m.Get("id").Exists():
			target, what = sch.request, "ClientRequest"
		case m.Get("method").Exists():
			target, what = sch.notification, "ClientNotification"
		case m.Get("error").Exists():
			if m.Get("error.code").Type != gjson.Number || m.Get("error.message").Type != gjson.String {
				t.Errorf("error answer to Codex without code and message: %s", r.Msg)
			}
			continue
		default:
			method := asked[m.Get("id").Raw]
			target, what = sch.responses[method], method+" response"
			if target == nil {
				t.Errorf("the bridge answered Codex's request %s (%q), which it never mapped: %s", m.Get("id").Raw, method, r.Msg)
				continue
			}
			doc, _ = jsonschema.UnmarshalJSON(strings.NewReader(m.Get("result").Raw))
		}
		if err := target.Validate(doc); err != nil {
			t.Errorf("frame to Codex is not a valid %s: %s\n%v", what, r.Msg, err)
		}
	}
	if sent < 5 {
		t.Errorf("the trace holds %d frames to Codex, want the whole session's", sent)
	}
}

// The same bridge and Codex driven by the official TypeScript SDK's client
// (tests/testdata/codexeditor/editor.mjs), which validates every message
// it receives: streamed text and thoughts, a command allowed once, a cancel.
func TestCodex_RealCLI_TypeScriptSDK(t *testing.T) {
	t.Parallel()
	argv := NodeScript(t, "testdata/codexeditor/editor.mjs")
	s := newCodexSetup(t, "stdio")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := StartBridge(t, s.args, s.env, pw)
	resultFile := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CODEX_CWD="+s.cwd, "CODEX_RESULT="+resultFile)
	cmd.Stdin, cmd.Stdout = pr, b.In
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * codexWait):
		_ = cmd.Process.Kill()
		err = <-done
		t.Errorf("the TypeScript editor did not finish within %s", 2*codexWait)
	}
	pw.Close()
	b.In.Close()
	b.WaitExit(codexWait)
	if err != nil {
		t.Fatalf("TypeScript editor: %v\nstderr:\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Agent       string
		Modes       []string
		Stops       []string
		Texts       []string
		Thoughts    []string
		Permissions [][]string
		Error       *string
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if res.Error != nil {
		t.Fatalf("the TypeScript SDK failed: %s\nbridge stderr:\n%s", *res.Error, tail(b.Stderr(), 8<<10))
	}
	if !slices.Equal(res.Stops, []string{"end_turn", "end_turn", "cancelled"}) {
		t.Errorf("stop reasons %q, want end_turn, end_turn, cancelled", res.Stops)
	}
	if got := strings.Join(res.Texts, ""); !strings.Contains(got, fakeresponses.Hello) || !strings.Contains(got, fakeresponses.Done) {
		t.Errorf("texts %q, want %q and %q", got, fakeresponses.Hello, fakeresponses.Done)
	}
	if got := strings.Join(res.Thoughts, ""); got != fakeresponses.Thought {
		t.Errorf("thoughts %q, want %q", got, fakeresponses.Thought)
	}
	if len(res.Permissions) != 1 || !slices.Contains(res.Permissions[0], "allow_once:approved") || !slices.Contains(res.Permissions[0], "reject_once:abort") {
		t.Errorf("permission options %q, want allow once and reject", res.Permissions)
	}
	if _, err := os.Stat(filepath.Join(s.cwd, fakeresponses.RunFile)); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	validateCodexTrace(t, s.trace)
}
