package tests

// Scenarios for the claude-stream-json dialect (Claude Code's stream-json and
// control protocol, docs/agent-protocols.md#claude-stream-json). The CLI is
// tests/fakeagent/claude, run by the bridge as one child process per session
// with the command line the dialect builds; the editor is acp-go-sdk's client,
// and the harness checks every stdout line against the ACP schema. What each
// fake CLI was started with and received is read back from its journal.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	fakeclaude "github.com/acp-bridge/acp-bridge/tests/fakeagent/claude"
	"github.com/acp-bridge/acp-bridge/translate/claude"
)

func init() {
	ChildAgents["claude"] = fakeclaude.RunStdio
}

// claudeEditor is an Editor in front of fake Claude Code CLIs.
type claudeEditor struct {
	*Editor
	journalDir string
}

// newClaudeEditor starts a bridge with --dialect claude-stream-json whose
// configured command is the test binary with one configured argument (so
// that the dialect's flags are seen to come after it). Its cleanup, which
// runs after the bridge has exited, fails the test on any protocol
// violation a fake CLI recorded and on any CLI whose input never ended.
func newClaudeEditor(t *testing.T, journalDir string, args ...string) *claudeEditor {
	t.Helper()
	if journalDir == "" {
		journalDir = t.TempDir()
	}
	// Registered before NewEditor, so it runs after the bridge's cleanup.
	t.Cleanup(func() { claudeCheckJournals(t, journalDir) })
	tr := Transport{Name: "child", Start: func(t *testing.T) Agent {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return Agent{Args: []string{"--", exe, "--configured-arg"}, Env: []string{
			"FAKE_AGENT=claude",
			fakeclaude.EnvJournal + "=" + journalDir,
			"GORACE=atexit_sleep_ms=0",
		}}
	}}
	args = append([]string{"--dialect", "claude-stream-json", "--log-level", "debug"}, args...)
	return &claudeEditor{Editor: NewEditor(t, tr, EditorOptions{Args: args}), journalDir: journalDir}
}

func claudeCheckJournals(t *testing.T, dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		js, err := fakeclaude.ReadJournals(dir)
		if err != nil {
			t.Errorf("reading CLI journals: %v", err)
			return
		}
		var running []string
		for _, j := range js {
			if !j.HasEvent("eof") && !j.HasEvent("crash") {
				running = append(running, fmt.Sprintf("pid %d cwd %s", j.Pid, j.Cwd))
			}
		}
		if len(running) == 0 || time.Now().After(deadline) {
			for _, r := range running {
				t.Errorf("fake CLI (%s) never saw its input end after the bridge exited", r)
			}
			for _, j := range js {
				for _, v := range j.Violations() {
					t.Errorf("fake CLI pid %d cwd %s: %s", j.Pid, j.Cwd, v)
				}
				if t.Failed() {
					t.Logf("journal %s argv %q:\n  received:\n\t%s\n  events: %q", j.File, j.Argv, strings.Join(j.Received, "\n\t"), j.Events)
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *claudeEditor) journals(t *testing.T) []fakeclaude.Journal {
	t.Helper()
	js, err := fakeclaude.ReadJournals(e.journalDir)
	if err != nil {
		t.Fatalf("reading CLI journals: %v", err)
	}
	return js
}

// journalIn waits for the journal of the one CLI running in cwd to satisfy
// cond, and returns it.
func (e *claudeEditor) journalIn(t *testing.T, cwd, what string, cond func(fakeclaude.Journal) bool) fakeclaude.Journal {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		var last fakeclaude.Journal
		found := 0
		for _, j := range e.journals(t) {
			if sameDir(j.Cwd, cwd) {
				last = j
				found++
			}
		}
		if found > 1 {
			t.Fatalf("%d CLIs run in %s, want 1", found, cwd)
		}
		if found == 1 && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("CLI in %s: %s did not happen within %v; argv %q, received %q, events %q", cwd, what, WaitTimeout, last.Argv, last.Received, last.Events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantArgv is the command line the bridge must start the CLI with: the
// configured argument, then the dialect's flags.
func wantArgv(idFlag, uuid string, extra ...string) []string {
	argv := append([]string{"--configured-arg"}, claude.StreamFlags...)
	argv = append(argv, idFlag, uuid)
	return append(argv, extra...)
}

// Initialize needs no CLI; session/new starts one in the session's cwd with
// the dialect's flags and a --session-id derived from the ACP id; the
// captured run streams through as the reference adapter shows it.
func TestClaude_StreamingAndFlags(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "")
	res := e.Initialize(t)
	caps := res.AgentCapabilities
	if res.ProtocolVersion != 1 || !caps.LoadSession || !caps.PromptCapabilities.Image || !caps.PromptCapabilities.EmbeddedContext ||
		caps.PromptCapabilities.Audio || caps.SessionCapabilities.Resume == nil || caps.SessionCapabilities.Close == nil {
		t.Errorf("initialize = %+v, want v1, loadSession, image, embedded context, resume, close", res)
	}
	if len(res.AuthMethods) != 1 || res.AuthMethods[0].Agent == nil || res.AuthMethods[0].Agent.Id != "claude-login" {
		t.Errorf("authMethods = %+v, want the one claude-login method", res.AuthMethods)
	}
	if js := e.journals(t); len(js) != 0 {
		t.Errorf("%d CLI processes after initialize, want none (no control process)", len(js))
	}

	cwd := t.TempDir()
	ns, err := e.Conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	sid := ns.SessionId
	var modeIDs []string
	if ns.Modes != nil {
		for _, m := range ns.Modes.AvailableModes {
			modeIDs = append(modeIDs, string(m.Id))
		}
	}
	if ns.Modes == nil || ns.Modes.CurrentModeId != "default" || !slices.Equal(modeIDs, []string{"default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"}) {
		t.Errorf("modes = %+v, want default of default, acceptEdits, plan, dontAsk, bypassPermissions", ns.Modes)
	}
	var optionIDs []string
	for _, o := range ns.ConfigOptions {
		if o.Select != nil {
			optionIDs = append(optionIDs, string(o.Select.Id))
		}
	}
	if !slices.Equal(optionIDs, []string{"mode", "model"}) {
		t.Errorf("config options %q, want mode and model", optionIDs)
	}
	j := e.journalIn(t, cwd, "control initialize", func(j fakeclaude.Journal) bool { return len(j.Requests("initialize")) == 1 })
	if want := wantArgv("--session-id", claude.SessionUUID(string(sid))); !slices.Equal(j.Argv, want) {
		t.Errorf("CLI argv = %q\nwant %q", j.Argv, want)
	}
	if j.Received[0] != `{"type":"control_request","request_id":"req_1","request":{"subtype":"initialize","hooks":null}}` {
		t.Errorf("first line to the CLI = %s, want the control initialize", j.Received[0])
	}
	// The slash commands follow the session/new answer.
	waitUntil(t, WaitTimeout, "available commands", func() bool {
		for _, u := range e.Fake.Updates(sid) {
			if c := u.Update.AvailableCommandsUpdate; c != nil && len(c.AvailableCommands) == 2 && c.AvailableCommands[0].Name == "compact" {
				return true
			}
		}
		return false
	})

	r, err := e.Prompt(ctxT(t), sid, "list files")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	ids := wantEndTurnAfterUpdates(t, e.Editor, sid, resp, []string{
		"available_commands_update",
		"message I'll list ", "message the files.",
		// One tool_call, refined by a tool_call_update once the input is
		// whole, as claude-agent-acp does: never a second tool_call.
		"tool_call pending execute", "tool_call_update ", "tool_call_update completed",
		"message All done.",
	})
	if len(ids) != 3 || ids[0] != "toolu_fake1" || ids[1] != "toolu_fake1" || ids[2] != "toolu_fake1" {
		t.Errorf("tool call ids %q, want toolu_fake1 thrice", ids)
	}
	if got := resp.Get("result._meta.claudeCode.totalCostUsd").Float(); got != 0.00063 {
		t.Errorf("prompt answer %s: want the cost under _meta.claudeCode", resp)
	}
	if u, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.status").Str == "completed" }); !ok ||
		u.Get("params.update.content.0.content.text").Str != "```console\n"+fakeclaude.ToolOutput+"\n```" || u.Get("params.update.rawOutput").Str != fakeclaude.ToolOutput {
		t.Errorf("completed update = %s, want the output %q in a console block as content, and as rawOutput", u, fakeclaude.ToolOutput)
	}
	j = e.journalIn(t, cwd, "the prompt", func(j fakeclaude.Journal) bool { return len(j.UserMessages()) == 1 })
	if got, want := j.UserMessages()[0], `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"list files"}]},"parent_tool_use_id":null,"session_id":"default","uuid":"`+claude.SessionUUID(string(sid)+"/prompt/1")+`"}`; got != want {
		t.Errorf("CLI received %s\nwant %s", got, want)
	}
	if n := len(e.journals(t)); n != 1 {
		t.Errorf("%d CLI processes, want 1", n)
	}
}

// The editor's MCP servers reach the CLI through --mcp-config and its extra
// directories through --add-dir, after the options block's model and mode
// and before its extra arguments.
func TestClaude_SessionFlags(t *testing.T) {
	t.Parallel()
	// A configured agent: its command is the test binary with one
	// argument of its own, its options block the dialect's.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "acp-bridge.hcl")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `agent "claude" {
  dialect = "claude-stream-json"
  command = [%q, "--configured-arg"]
  options {
    model           = "opus"
    permission_mode = "acceptEdits"
    extra_args      = ["--max-turns", "7"]
  }
}
`, exe), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { claudeCheckJournals(t, dir) })
	tr := Transport{Name: "config", Start: func(t *testing.T) Agent {
		return Agent{Env: []string{"FAKE_AGENT=claude", fakeclaude.EnvJournal + "=" + dir, "GORACE=atexit_sleep_ms=0"}}
	}}
	e := &claudeEditor{Editor: NewEditor(t, tr, EditorOptions{Args: []string{"--config", cfg, "--log-level", "debug"}}), journalDir: dir}
	e.Initialize(t)
	cwd, lib := t.TempDir(), t.TempDir()
	ns, err := e.Conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: cwd, AdditionalDirectories: []string{lib}, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "files", Command: "/bin/mcp-files", Args: []string{"--root", cwd}, Env: []acp.EnvVariable{{Name: "TOKEN", Value: "t"}}}},
		{Http: &acp.McpServerHttpInline{Name: "web", Url: "https://mcp.example/x", Headers: []acp.HttpHeader{}}},
	}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	if ns.Modes == nil || ns.Modes.CurrentModeId != "acceptEdits" {
		t.Errorf("modes = %+v, want the configured acceptEdits", ns.Modes)
	}
	j := e.journalIn(t, cwd, "start", func(j fakeclaude.Journal) bool { return len(j.Received) > 0 })
	mcp := fmt.Sprintf(`{"mcpServers":{"files":{"type":"stdio","command":"/bin/mcp-files","args":["--root",%q],"env":{"TOKEN":"t"}},"web":{"type":"http","url":"https://mcp.example/x","headers":{}}}}`, cwd)
	want := append([]string{"--configured-arg"}, claude.StreamFlags...)
	want = append(want, "--model", "opus", "--permission-mode", "acceptEdits", "--session-id", claude.SessionUUID(string(ns.SessionId)),
		"--mcp-config", mcp, "--add-dir", lib, "--max-turns", "7")
	if !slices.Equal(j.Argv, want) {
		t.Errorf("CLI argv = %q\nwant %q", j.Argv, want)
	}
	if r, err := e.Prompt(ctxT(t), ns.SessionId, "mode"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	if c := e.Fake.Chunks(ns.SessionId); c[len(c)-1] != "mode is acceptEdits" {
		t.Errorf("chunks %q, want the CLI started in acceptEdits", c)
	}
}

// A tool that needs approval: the editor allows once, always, or rejects;
// the CLI gets the matching control_response.
func TestClaude_Permission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		option, event string
		want          []string
	}{
		{"allow", "allow", []string{"tool_call pending execute", "tool_call_update ", "tool_call_update completed", "message Created."}},
		{"allow_always", "allow-always", []string{"tool_call pending execute", "tool_call_update ", "tool_call_update completed", "message Created."}},
		{"reject", "deny", []string{"tool_call pending execute", "tool_call_update ", "tool_call_update failed", "message Not created."}},
	} {
		t.Run(tc.option, func(t *testing.T) {
			t.Parallel()
			e := newClaudeEditor(t, "")
			e.Fake.OnPermission(func(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(tc.option))}, nil
			})
			e.Initialize(t)
			cwd := t.TempDir()
			sid := e.NewSession(t, cwd)
			r, err := e.Prompt(ctxT(t), sid, "touch")
			if err != nil || r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
			}
			got, _ := updates(e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")).N)
			if got = slices.DeleteFunc(got, func(s string) bool { return s == "available_commands_update" }); !slices.Equal(got, tc.want) {
				t.Errorf("updates = %q, want %q", got, tc.want)
			}
			perms := e.Fake.Permissions()
			if len(perms) != 1 {
				t.Fatalf("editor got %d permission requests, want 1", len(perms))
			}
			var opts []string
			for _, o := range perms[0].Options {
				opts = append(opts, string(o.OptionId)+"/"+string(o.Kind))
			}
			if want := []string{"allow_always/allow_always", "allow/allow_once", "reject/reject_once"}; !slices.Equal(opts, want) {
				t.Errorf("options = %q, want %q", opts, want)
			}
			if p := perms[0]; p.ToolCall.ToolCallId != "toolu_touch" || p.ToolCall.Title == nil || *p.ToolCall.Title != "touch made-by-tool.txt" ||
				p.ToolCall.Kind == nil || *p.ToolCall.Kind != acp.ToolKindExecute {
				t.Errorf("permission tool call = %+v", p.ToolCall)
			}
			e.journalIn(t, cwd, "the answer", func(j fakeclaude.Journal) bool { return j.HasEvent(tc.event) })
			_, statErr := os.Stat(filepath.Join(cwd, "made-by-tool.txt"))
			if (tc.event == "deny") != os.IsNotExist(statErr) {
				t.Errorf("made-by-tool.txt after %s: stat %v", tc.option, statErr)
			}
		})
	}
}

// session/cancel mid-turn: the CLI is interrupted, the prompt ends
// "cancelled", and the same CLI takes the next prompt. A cancel while a
// permission request is pending withdraws it and ends the turn without the
// editor's answer.
func TestClaude_CancelMidTurn(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "")
	asked := make(chan struct{}, 1)
	e.Fake.OnPermission(func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		asked <- struct{}{}
		<-ctx.Done() // an editor whose user never answers
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	})
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)

	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.Prompt(ctxT(t), sid, "slow")
		if err != nil {
			t.Errorf("slow prompt: %v", err)
		}
		done <- r
	}()
	waitUntil(t, WaitTimeout, "the first chunk", func() bool { return slices.Contains(e.Fake.Chunks(sid), "Working") })
	start := time.Now()
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			t.Errorf("stopReason = %s, want cancelled", r.StopReason)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("the cancelled prompt was not answered")
	}
	// The CLI ended the turn itself, well inside the bridge's grace period.
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("cancel took %v", d)
	}
	j := e.journalIn(t, cwd, "interrupt", func(j fakeclaude.Journal) bool { return j.HasEvent("interrupt") })
	if len(j.Requests("interrupt")) != 1 {
		t.Errorf("CLI got %d interrupts, want 1", len(j.Requests("interrupt")))
	}

	// A cancel with a permission request pending.
	go func() {
		r, err := e.Prompt(ctxT(t), sid, "touch")
		if err != nil {
			t.Errorf("touch prompt: %v", err)
		}
		done <- r
	}()
	select {
	case <-asked:
	case <-time.After(WaitTimeout):
		t.Fatal("no permission request")
	}
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			t.Errorf("stopReason = %s, want cancelled", r.StopReason)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("the prompt cancelled during a permission request was not answered")
	}
	if _, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Method() == "$/cancel_request" }); !ok {
		t.Error("the pending permission request was not withdrawn with $/cancel_request")
	}
	// The CLI got its answer without waiting for the editor's: denied,
	// with interrupt.
	e.journalIn(t, cwd, "deny", func(j fakeclaude.Journal) bool {
		return slices.ContainsFunc(j.Received, func(l string) bool {
			return strings.Contains(l, `"behavior":"deny"`) && strings.Contains(l, `"interrupt":true`)
		})
	})

	r, err := e.Prompt(ctxT(t), sid, "hello")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after cancels = %+v, %v", r, err)
	}
	if c := e.Fake.Chunks(sid); c[len(c)-1] != "echo: hello" {
		t.Errorf("last chunk %q, want the echo", c[len(c)-1])
	}
	if n := len(e.journals(t)); n != 1 {
		t.Errorf("%d CLI processes, want the same one throughout", n)
	}
}

// Two permission requests pending at once (two subagents;
// agentclientprotocol/claude-agent-acp #830, #851): each reaches the editor as
// its own request, session/new and other requests are served meanwhile, and
// the answers, given in the reverse order, reach the right tool.
func TestClaude_ConcurrentPermissions(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "", "--no-sessions") // pins the CLI's own capabilities
	type ask struct {
		tool   acp.ToolCallId
		answer chan acp.PermissionOptionId
	}
	asks := make(chan ask, 2)
	e.Fake.OnPermission(func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		a := ask{p.ToolCall.ToolCallId, make(chan acp.PermissionOptionId, 1)}
		asks <- a
		select {
		case id := <-a.answer:
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
		case <-ctx.Done():
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
		}
	})
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)
	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.Prompt(ctxT(t), sid, "two tools")
		if err != nil {
			t.Errorf("prompt: %v", err)
		}
		done <- r
	}()
	pending := map[acp.ToolCallId]ask{}
	for len(pending) < 2 {
		select {
		case a := <-asks:
			pending[a.tool] = a
		case <-time.After(WaitTimeout):
			t.Fatalf("%d permission requests reached the editor, want 2 at once", len(pending))
		}
	}
	// Neither pending request holds up the rest of the bridge.
	other := e.NewSession(t, "")
	if r, err := e.Prompt(ctxT(t), other, "hello"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt in another session while permissions are pending = %+v, %v", r, err)
	}
	if l := e.RawCall(t, "session/list", `{}`); l.Get("error.code").Int() != -32601 {
		t.Errorf("session/list = %s, want -32601", l)
	}
	pending["toolu_b"].answer <- "allow"
	e.journalIn(t, cwd, "b allowed", func(j fakeclaude.Journal) bool { return j.HasEvent("allow toolu_b") })
	pending["toolu_a"].answer <- "reject"
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonEndTurn {
			t.Errorf("stopReason = %s", r.StopReason)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("the prompt did not end")
	}
	j := e.journalIn(t, cwd, "a denied", func(j fakeclaude.Journal) bool { return j.HasEvent("deny toolu_a") })
	if j.HasEvent("deny toolu_b") || j.HasEvent("allow toolu_a") {
		t.Errorf("answers reached the wrong tools: %q", j.Events)
	}
	got, _ := updates(e.Editor, sid, -1)
	got = slices.DeleteFunc(got, func(s string) bool { return s == "available_commands_update" })
	if want := []string{"tool_call pending execute", "tool_call pending execute", "tool_call_update completed", "tool_call_update failed"}; !slices.Equal(got, want) {
		t.Errorf("updates = %q, want %q", got, want)
	}
}

// Modes and the model option reach the CLI as control requests; a mode the
// CLI refuses fails with its reason.
func TestClaude_ModeSwitch(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "")
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)
	if _, err := e.Conn.SetSessionMode(ctxT(t), acp.SetSessionModeRequest{SessionId: sid, ModeId: "acceptEdits"}); err != nil {
		t.Fatalf("set_mode: %v", err)
	}
	r, err := e.Prompt(ctxT(t), sid, "mode")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	if c := e.Fake.Chunks(sid); c[len(c)-1] != "mode is acceptEdits" {
		t.Errorf("chunks %q, want the CLI in acceptEdits", c)
	}
	res, err := e.Conn.SetSessionConfigOption(ctxT(t), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: sid, ConfigId: "model", Value: "opus"}})
	if err != nil {
		t.Fatalf("set_config_option model: %v", err)
	}
	if len(res.ConfigOptions) != 2 || res.ConfigOptions[1].Select == nil || res.ConfigOptions[1].Select.CurrentValue != "opus" {
		t.Errorf("config options after the switch = %+v", res.ConfigOptions)
	}
	_, err = e.Conn.SetSessionMode(ctxT(t), acp.SetSessionModeRequest{SessionId: sid, ModeId: "bypassPermissions"})
	if re := requestError(t, err); !strings.Contains(re.Message, "--dangerously-skip-permissions") {
		t.Errorf("refused mode error = %+v, want the CLI's reason", re)
	}
	e.journalIn(t, cwd, "mode and model", func(j fakeclaude.Journal) bool {
		return j.HasEvent("mode acceptEdits") && j.HasEvent("model opus") && len(j.Requests("set_permission_mode")) == 2
	})
}

// A session created through one bridge is resumed (session/resume) and
// loaded (session/load) through the next: a CLI started with --resume of the
// same UUID, in the session's cwd.
func TestClaude_Resume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cwd := t.TempDir()
	first := newClaudeEditor(t, dir)
	first.Initialize(t)
	sid := first.NewSession(t, cwd)
	if r, err := first.Prompt(ctxT(t), sid, "whoami"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	uuid := claude.SessionUUID(string(sid))
	if c := first.Fake.Chunks(sid); c[len(c)-1] != "session "+uuid+" resumed false" {
		t.Errorf("chunks %q", c)
	}
	first.In.Close()
	if _, ok := first.WaitExit(WaitTimeout); !ok {
		t.Fatal("the first bridge did not exit")
	}

	for _, method := range []string{"session/resume", "session/load"} {
		e := newClaudeEditor(t, t.TempDir())
		e.Initialize(t)
		var err error
		if method == "session/resume" {
			_, err = e.Conn.ResumeSession(ctxT(t), acp.ResumeSessionRequest{SessionId: sid, Cwd: cwd})
		} else {
			_, err = e.Conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}})
		}
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		r, err := e.Prompt(ctxT(t), sid, "whoami")
		if err != nil || r.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("%s: prompt = %+v, %v", method, r, err)
		}
		if c := e.Fake.Chunks(sid); len(c) == 0 || c[len(c)-1] != "session "+uuid+" resumed true" {
			t.Errorf("%s: chunks %q, want the CLI resumed with %s", method, c, uuid)
		}
		j := e.journalIn(t, cwd, "the prompt", func(j fakeclaude.Journal) bool { return len(j.UserMessages()) == 1 })
		if want := wantArgv("--resume", uuid); !slices.Equal(j.Argv, want) {
			t.Errorf("%s: CLI argv = %q\nwant %q", method, j.Argv, want)
		}
	}
}

// A CLI that dies mid-turn fails the prompt with an error naming the exit,
// the session is lost, and a new session starts a new CLI.
func TestClaude_ChildCrash(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "", "--no-sessions") // pins the CLI's own capabilities
	e.Initialize(t)
	sid := e.NewSession(t, "")
	_, err := e.Prompt(ctxT(t), sid, "crash")
	if re := requestError(t, err); !strings.Contains(re.Message, "exited with status 3") {
		t.Errorf("crashed prompt error = %+v, want the exit status", re)
	}
	_, err = e.Prompt(ctxT(t), sid, "hello")
	if re := requestError(t, err); !strings.Contains(re.Message, "lost") {
		t.Errorf("prompt on the lost session = %+v, want it named lost", re)
	}
	sid2 := e.NewSession(t, "")
	if r, err := e.Prompt(ctxT(t), sid2, "hello"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt on a new session = %+v, %v", r, err)
	}
	if n := len(e.journals(t)); n != 2 {
		t.Errorf("%d CLI processes, want 2", n)
	}
}

// An unusable backend and a missing login end the prompt with a JSON-RPC
// error carrying the CLI's words; the login one is ACP's auth-required.
func TestClaude_TurnErrors(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "")
	e.Initialize(t)
	sid := e.NewSession(t, "")
	_, err := e.Prompt(ctxT(t), sid, "api error")
	if re := requestError(t, err); re.Code != -32603 || re.Message != fakeclaude.APIError {
		t.Errorf("API error = %+v, want -32603 %q", re, fakeclaude.APIError)
	}
	_, err = e.Prompt(ctxT(t), sid, "login")
	if re := requestError(t, err); re.Code != -32000 || !strings.Contains(re.Message, "/login") {
		t.Errorf("login error = %+v, want -32000 naming /login", re)
	}
	if c := e.Fake.Chunks(sid); len(c) != 0 {
		t.Errorf("chunks %q: the CLI's error text belongs in the error, not the transcript", c)
	}
}

// A second session/prompt while one runs is queued, as claude-agent-acp
// queues it: it reaches the CLI at once, the CLI takes it when the running
// turn ends, and each prompt is answered by its own turn, end_turn, in
// order, the second prompt's output after the first's answer.
func TestClaude_PromptQueue(t *testing.T) {
	t.Parallel()
	e := newClaudeEditor(t, "")
	release := make(chan struct{})
	e.Fake.OnPermission(func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected("allow")}, nil
	})
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)

	type answer struct {
		r   acp.PromptResponse
		err error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		r, err := e.Prompt(ctxT(t), sid, "touch")
		first <- answer{r, err}
	}()
	waitUntil(t, WaitTimeout, "the first turn's permission request", func() bool { return len(e.Fake.Permissions()) == 1 })
	id1 := e.In.LastID("session/prompt")
	go func() {
		r, err := e.Prompt(ctxT(t), sid, "hello")
		second <- answer{r, err}
	}()
	j := e.journalIn(t, cwd, "the second prompt queued", func(j fakeclaude.Journal) bool { return j.HasEvent("queued") })
	if n := len(j.UserMessages()); n != 2 {
		t.Errorf("CLI received %d user messages while the first turn ran, want 2", n)
	}
	id2 := e.In.LastID("session/prompt")
	if id1 == id2 {
		t.Fatalf("the second prompt was not sent (last prompt id %s)", id2)
	}
	close(release)

	for i, ch := range []chan answer{first, second} {
		select {
		case a := <-ch:
			if a.err != nil || a.r.StopReason != acp.StopReasonEndTurn {
				t.Errorf("prompt %d = %+v, %v; want end_turn", i+1, a.r, a.err)
			}
		case <-time.After(WaitTimeout):
			t.Fatalf("prompt %d was not answered", i+1)
		}
	}
	r1, r2 := e.Out.Response(t, id1), e.Out.Response(t, id2)
	echo, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.content.text").Str == "echo: hello" })
	if !ok {
		t.Fatal("no chunk of the second prompt's turn (echo: hello)")
	}
	if !(r1.N < echo.N && echo.N < r2.N) {
		t.Errorf("stdout lines: first answer %d, second turn's chunk %d, second answer %d; want them in that order", r1.N, echo.N, r2.N)
	}
	if created, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.content.text").Str == "Created." }); !ok || created.N > r1.N {
		t.Errorf("the first turn's message (line %d, found %v) should come before its answer (line %d)", created.N, ok, r1.N)
	}
}

// session/load of a session a bridge that has since exited ran replays its
// history before the answer, as claude-agent-acp 0.23.1 replays the CLI's
// session file (loadSession → replaySessionHistory → toAcpNotifications,
// read from its source): the prompt as user_message_chunk, then thoughts,
// the plan (TodoWrite), the tool call and its result, the image and the
// text, in the order the turn showed them; the available commands come
// after the answer. session/resume replays nothing, as the adapter's
// unstable_resumeSession does not. The comparison cannot run against the
// adapter itself: its replay reads the CLI's session files through the
// Agent SDK (getSessionMessages), which the fake CLI does not write.
func TestClaude_LoadReplay(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cwd := t.TempDir()
	first := newClaudeEditor(t, "", "--state-dir", state)
	first.Initialize(t)
	sid := first.NewSession(t, cwd)
	if r, err := first.Prompt(ctxT(t), sid, "plan"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	first.In.Close()
	if _, ok := first.WaitExit(WaitTimeout); !ok {
		t.Fatal("the first bridge did not exit")
	}

	want := []string{
		"user_message_chunk text plan",
		"agent_thought_chunk text Plan first, then read.",
		"plan",
		"tool_call toolu_read read",
		"tool_call_update toolu_read completed",
		"agent_message_chunk image",
		"agent_message_chunk text Planned.",
	}
	for _, method := range []string{"session/load", "session/resume"} {
		e := newClaudeEditor(t, "", "--state-dir", state)
		e.Initialize(t)
		var err error
		if method == "session/resume" {
			_, err = e.Conn.ResumeSession(ctxT(t), acp.ResumeSessionRequest{SessionId: sid, Cwd: cwd})
		} else {
			_, err = e.Conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}})
		}
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		answer := e.Out.Response(t, e.In.LastID(method))
		// What an editor shows: text chunks of one kind in a row are one
		// text (the bridge replays them as they streamed, the adapter
		// whole), and a tool_call_update without a status only fills in
		// the input (the adapter's replayed tool_call has it already).
		var got []string
		for _, l := range e.Out.Lines() {
			if l.N > answer.N || l.Method() != "session/update" {
				continue
			}
			u := l.Get("params.update")
			s := u.Get("sessionUpdate").Str
			switch s {
			case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
				typ := u.Get("content.type").Str
				if n := len(got); typ == "text" && n > 0 && strings.HasPrefix(got[n-1], s+" text ") {
					got[n-1] += u.Get("content.text").Str
					continue
				}
				s += " " + typ
				if typ == "text" {
					s += " " + u.Get("content.text").Str
				}
			case "tool_call":
				s += " " + u.Get("toolCallId").Str + " " + u.Get("kind").Str
			case "tool_call_update":
				if !u.Get("status").Exists() {
					if !u.Get("rawInput").IsObject() {
						t.Errorf("%s replayed a tool_call_update with neither status nor input: %s", method, u.Raw)
					}
					continue
				}
				s += " " + u.Get("toolCallId").Str + " " + u.Get("status").Str
			}
			got = append(got, s)
		}
		e.In.Close()
		if _, ok := e.WaitExit(WaitTimeout); !ok {
			t.Fatalf("the bridge of %s did not exit", method)
		}
		if method == "session/resume" {
			if len(got) != 0 {
				t.Errorf("session/resume sent %q before its answer, want no replay", got)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("session/load replayed\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
}
