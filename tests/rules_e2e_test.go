package tests

// Scenarios for the rule profiles shipped in translate/rules/profiles: for
// each, a fake agent that speaks the documented frames
// (tests/fakeagent/rules, one file per format) behind the built binary,
// driven by acp-go-sdk's client, every stdout line checked against the ACP
// schema by the harness. The fake agents answer by the prompt's first word
// (see package fakerules).

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

func init() {
	ChildAgents["rules-agent-rpc"] = fakerules.RunStdio(fakerules.AgentRPC)
	ChildAgents["rules-zeroclaw"] = fakerules.RunStdio(fakerules.ZeroClaw)
	ChildAgents["rules-chat-lines"] = fakerules.RunStdio(fakerules.ChatLines)
}

// jobqProfile is a user dialect for fakerules.Jobq: its frames name their
// job (turn { key }), its stop names job 999 (a job no turn has), it
// answers the agent's pings, and a job's question is a permission whose
// refusal ends the turn (reject_ends_turn's default). DONE is the done
// rule's op (misspelt by a test that needs a turn that never ends).
const jobqProfile = `dialect "jobq" {
  turn {
    key     = "job"
    quiet   = "500ms"
    give_up = "1500ms"
  }
  request "session/prompt" {
    send = { op = "run", job = id, text = prompt.text }
  }
  cancel {
    send = { op = "abort", job = 999 }
  }
  error {
    match   = { op = "fail" }
    message = "jobq ${frame.code}: ${frame.msg}"
  }
  event "ping" {
    match = { op = "ping" }
    send  = { op = "pong" }
  }
  event "progress" {
    match   = { op = "progress" }
    message = frame.text
  }
  event "tool" {
    match = { op = "tool", status = "running" }
    tool {
      open   = true
      key    = frame.id
      name   = frame.name
      status = "in_progress"
    }
  }
  event "tool-end" {
    match = { op = "tool" }
    tool {
      key    = frame.id
      output = frame.output
      status = map(frame.status, { done = "completed" })
      close  = true
    }
  }
  event "ask" {
    match = { op = "ask" }
    permission {
      allow  = { op = "approve", job = turn.sent.job, ask = frame.ask }
      reject = { op = "deny", job = turn.sent.job, ask = frame.ask }
    }
  }
  event "done" {
    match    = { op = "DONE" }
    end_turn = "end_turn"
  }
}
`

// jobqEditor starts a bridge serving fakerules.Jobq through jobqProfile
// with the done rule's op done.
func jobqEditor(t *testing.T, done string) *Editor {
	t.Helper()
	cfg := t.TempDir() + "/jobq.hcl"
	if err := os.WriteFile(cfg, []byte(strings.Replace(jobqProfile, "DONE", done, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return NewEditor(t, WSTransport(fakerules.Jobq), EditorOptions{Args: []string{
		"--dialect", "jobq", "--config", cfg, "--no-sessions", "--log-level", "info"}})
}

// withEnv adds environment variables to the bridge that tr starts.
func withEnv(tr Transport, env ...string) Transport {
	return Transport{Name: tr.Name, Start: func(t *testing.T) Agent {
		a := tr.Start(t)
		a.Env = append(a.Env, env...)
		return a
	}}
}

// rulesProfile is what one profile's scenarios expect.
type rulesProfile struct {
	dialect    string
	transports []Transport
	// hello, tool: the update summaries of a "hello there" and a "tool"
	// turn (tool nil: the format has no tools).
	hello, tool []string
	// approve: the format asks for permission ("approve" prompt).
	approve []string
	// echo is the exact prompt frame the agent received for "echo"
	// (timestamps blanked; CWD stands for the session's cwd).
	echo string
	// failMsg is part of the agent's error message for "fail".
	failMsg string
	// args are extra bridge flags (a --config with a user dialect).
	args []string
	// connectExpect: the profile's connect block waits for a frame.
	connectExpect bool
}

var rulesProfiles = []rulesProfile{
	{
		dialect:       "mini-agent-ws",
		transports:    []Transport{WSTransport(fakerules.MiniAgent)},
		hello:         []string{"message You said: hello there"},
		echo:          `{"id":"3","type":"prompt","timestamp":"T","session_id":"sid-uuid-2","data":{"prompt":"echo"}}`,
		failMsg:       "Agent processing failed: Agent.run() takes 1 positional argument but 2 were given",
		connectExpect: true,
	},
	{
		dialect:    "agent-rpc",
		transports: []Transport{ChildTransport("rules-agent-rpc"), WSTransport(fakerules.AgentRPC)},
		hello:      []string{"thought Processing your request...", "message You said: ", "message hello there"},
		tool:       []string{"thought Processing your request...", "tool_call in_progress execute", "tool_call_update completed", "message Found a.txt"},
		echo:       `{"jsonrpc":"2.0","id":3,"method":"agent/prompt","params":{"sessionId":"uuid-1","prompt":"echo"}}`,
		failMsg:    "model overloaded, try later",
	},
	{
		dialect:       "open-interpreter",
		transports:    []Transport{withEnv(WSTransport(fakerules.OpenInterpreter("sk-e2e")), "INTERPRETER_API_KEY=sk-e2e")},
		hello:         []string{"message You said: ", "message hello there"},
		tool:          []string{"message Let me", "message  check.", "tool_call pending execute", "tool_call_update in_progress", "tool_call_update completed"},
		approve:       []string{"tool_call pending execute", "tool_call_update in_progress", "tool_call_update in_progress", "tool_call_update completed", "message Done."},
		echo:          `["{\"role\":\"user\",\"start\":true}","{\"role\":\"user\",\"type\":\"message\",\"content\":\"echo\"}","{\"role\":\"user\",\"end\":true}"]`,
		failMsg:       "ZeroDivisionError: division by zero",
		connectExpect: true,
	},
	{
		dialect:    "zeroclaw",
		transports: []Transport{ChildTransport("rules-zeroclaw")},
		hello:      []string{"thought Thinking about it", "message You said: ", "message hello there"},
		tool: []string{"thought Thinking about it", "tool_call in_progress execute", "tool_call in_progress read",
			"tool_call_update completed", "tool_call_update completed", "message Found a.txt"},
		echo:    `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"session_id":"0f0e-b","prompt":"echo"}}`,
		failMsg: "provider error: rate limited",
	},
	{
		dialect:    "chat-lines",
		transports: []Transport{ChildTransport("rules-chat-lines")},
		hello: []string{"thought greeting", `plan [{"content":"answer","priority":"high","status":"in_progress"}]`,
			"message You said: ", "message hello there"},
		echo:    `{"message":"echo","cwd":"CWD"}`,
		failMsg: "no model configured",
	},
	{
		// The worked example of docs/bridge-your-agent.md: a user dialect from a
		// config file.
		dialect:    "tinychat",
		args:       []string{"--config", "testdata/tinychat.hcl"},
		transports: []Transport{WSTransport(fakerules.Tinychat)},
		hello:      []string{"message You said: ", "message hello there"},
		tool:       []string{"tool_call in_progress search", "tool_call_update completed", "message Found it"},
		echo:       `{"op":"ask","conv":"c-1","text":"echo"}`,
		failMsg:    "tinychat: out of tokens",
	},
}

var timestamps = regexp.MustCompile(`"timestamp":"[^"]*"`)

// turn sends one text prompt and returns its answer line and the update
// summaries the editor got for it before the answer.
func turn(t *testing.T, e *Editor, sid acp.SessionId, text string) (Line, []string) {
	t.Helper()
	before, _ := updates(e, sid, -1)
	_, _ = e.Prompt(ctxT(t), sid, text)
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	got, _ := updates(e, sid, resp.N)
	return resp, got[len(before):]
}

func wantTurn(t *testing.T, what string, resp Line, got, want []string) {
	t.Helper()
	if r := resp.Get("result.stopReason").Str; r != "end_turn" {
		t.Errorf("%s: answer %s, want stopReason end_turn", what, resp)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: updates\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestRules_Profiles(t *testing.T) {
	t.Parallel()
	for _, p := range rulesProfiles {
		t.Run(p.dialect, func(t *testing.T) {
			t.Parallel()
			RunTransports(t, p.transports, func(t *testing.T, tr Transport) {
				testRulesProfile(t, p, tr)
			})
		})
	}
}

func testRulesProfile(t *testing.T, p rulesProfile, tr Transport) {
	e := NewEditor(t, tr, EditorOptions{Args: append([]string{"--dialect", p.dialect, "--log-level", "debug", "--no-sessions"}, p.args...)})
	res := e.Initialize(t)
	if res.ProtocolVersion != 1 || res.AgentCapabilities.PromptCapabilities.Image || res.AgentCapabilities.LoadSession {
		t.Errorf("initialize = %+v; want v1 without images or session/load", res)
	}
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)

	// The exact frame the agent got.
	resp, got := turn(t, e, sid, "echo")
	if resp.Get("result.stopReason").Str != "end_turn" || len(got) == 0 {
		t.Fatalf("echo turn: %s, updates %q", resp, got)
	}
	echoed := strings.TrimPrefix(got[len(got)-1], "message ")
	want := strings.ReplaceAll(p.echo, "CWD", cwd)
	if timestamps.ReplaceAllString(echoed, `"timestamp":"T"`) != want {
		t.Errorf("the agent received\n\t%s\nwant\n\t%s", echoed, want)
	}

	resp, got = turn(t, e, sid, "hello there")
	wantTurn(t, "hello", resp, got, p.hello)
	if p.tool != nil {
		resp, got = turn(t, e, sid, "tool")
		wantTurn(t, "tool", resp, got, p.tool)
	}
	if p.approve != nil {
		resp, got = turn(t, e, sid, "approve")
		wantTurn(t, "approve", resp, got, p.approve)
		if n := len(e.Fake.Permissions()); n != 1 {
			t.Errorf("%d permission requests, want 1", n)
		}
	}

	// Cancel: the prompt ends "cancelled" promptly, and the next turn is
	// clean (late frames of the cancelled one were dropped).
	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, _ := e.Prompt(context.Background(), sid, "slow")
		done <- r
	}()
	waitFor(t, "the slow prompt to reach the bridge", func() bool { return e.In.LastID("session/prompt") != resp.ID() })
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			t.Errorf("cancelled prompt ended %q, want cancelled", r.StopReason)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("cancel took %v", d)
		}
	case <-time.After(WaitTimeout):
		t.Fatalf("cancelled prompt not answered within %v", WaitTimeout)
	}
	resp, got = turn(t, e, sid, "hello there")
	wantTurn(t, "hello after cancel", resp, got, p.hello)

	// The agent's error frame: a JSON-RPC error naming its message.
	resp, _ = turn(t, e, sid, "fail")
	if msg := resp.Get("error.message").Str; !strings.Contains(msg, p.failMsg) {
		t.Errorf("fail turn answered %s; want an error naming %q", resp, p.failMsg)
	}

	// The connection drops mid-turn: an error, promptly.
	resp, _ = turn(t, e, sid, "die")
	if _, ok := resp.ErrorCode(); !ok {
		t.Errorf("prompt during a dropped connection answered %s, want an error", resp)
	}

	// Waiting for the connect frame is what it is, not a repair of the
	// stream (the log's debug lines, and the repair summary at exit).
	if p.connectExpect {
		stderrLine(t, e, "the connect-expect debug line", "waiting for the agent's connect frame", "connect frame matching")
	}
	if log := e.Bridge.Stderr(); strings.Contains(log, "repair=connect-expect") || strings.Contains(log, "connect-expect=") {
		t.Errorf("connect-expect logged as a repair:\n%s", log)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", WaitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A refused API key fails initialize with a sentence saying what to do.
func TestRules_OpenInterpreterBadKey(t *testing.T) {
	t.Parallel()
	tr := withEnv(WSTransport(fakerules.OpenInterpreter("right")), "INTERPRETER_API_KEY=wrong")
	e := NewEditor(t, tr, EditorOptions{Args: []string{"--dialect", "open-interpreter"}})
	line := e.RawCall(t, "initialize", `{"protocolVersion":1}`)
	if msg := line.Get("error.message").Str; !strings.Contains(msg, "INTERPRETER_API_KEY") {
		t.Errorf("initialize with a wrong key answered %s; want an error naming INTERPRETER_API_KEY", line)
	}
	// The log says so at WARN, with the refusal frame and the variable.
	stderrLine(t, e, "the WARN line for the refused connection", "[WARN]", "agent refused the connection",
		`{\"auth\":false}`, "INTERPRETER_API_KEY")
}

var _ = fakeagent.Options{}

// The worked example of docs/bridge-your-agent.md quotes the tested
// profile verbatim.
func TestRules_DocsQuoteTinychat(t *testing.T) {
	profile, err := os.ReadFile("testdata/tinychat.hcl")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../docs/bridge-your-agent.md")
	if err != nil {
		t.Fatal(err)
	}
	block := string(profile[strings.Index(string(profile), "dialect \"tinychat\""):])
	if !strings.Contains(string(page), block) {
		t.Errorf("docs/bridge-your-agent.md does not quote the dialect block of tests/testdata/tinychat.hcl verbatim; update one from the other")
	}
}

// A cancel the agent refuses (an error frame in answer to the stop, then
// the rest of the run) still ends the turn for the editor: nothing of that
// turn reaches the editor after the "cancelled" answer, the refusal is
// logged at WARN with the agent's words, and the next prompt works.
func TestRules_CancelRefused(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, WSTransport(fakerules.Tinychat), EditorOptions{Args: []string{
		"--dialect", "tinychat", "--config", "testdata/tinychat.hcl", "--no-sessions"}})
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Prompt(context.Background(), sid, "stubborn")
	}()
	waitFor(t, "the first token", func() bool {
		got, _ := updates(e, sid, -1)
		return len(got) > 0
	})
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("cancelled prompt answered %s, want stopReason cancelled", resp)
	}
	<-done
	// The agent sent the rest of its run right after refusing the stop.
	time.Sleep(300 * time.Millisecond)
	all, _ := updates(e, sid, -1)
	before, _ := updates(e, sid, resp.N)
	if late := all[len(before):]; len(late) > 0 {
		t.Errorf("%d updates after the cancelled answer, want none: %q", len(late), late)
	}
	waitFor(t, "the WARN line", func() bool {
		for _, l := range strings.Split(e.Bridge.Stderr(), "\n") {
			if strings.Contains(l, "WARN") && strings.Contains(l, "refused the cancel") && strings.Contains(l, "no running chat 2") {
				return true
			}
		}
		return false
	})

	resp, got := turn(t, e, sid, "hello there")
	wantTurn(t, "hello after a refused cancel", resp, got, []string{"message You said: ", "message hello there"})
}

// A typo in a match leaves the turn without its end. The log says so when
// it happens: "turn started" at INFO, and the first frame no rule matched at
// WARN, with the session it belongs to; then, after the turn's quiet, a
// WARN naming that frame.
func TestRules_UnmatchedFrameWarns(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/tinychat.hcl")
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(src), `match    = { event = "done" }`, `match    = { event = "dnoe" }`, 1)
	if typo == string(src) {
		t.Fatal("testdata/tinychat.hcl has no done rule to misspell")
	}
	typo = strings.Replace(typo, "  connect {", "  turn {\n    quiet = \"300ms\"\n  }\n\n  connect {", 1)
	cfg := t.TempDir() + "/typo.hcl"
	if err := os.WriteFile(cfg, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	e := NewEditor(t, WSTransport(fakerules.Tinychat), EditorOptions{Args: []string{
		"--dialect", "tinychat", "--config", cfg, "--no-sessions", "--log-level", "info"}})
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	go func() { _, _ = e.Prompt(context.Background(), sid, "hello there") }()

	var warn string
	waitFor(t, "the WARN line for the unmatched frame", func() bool {
		for _, l := range strings.Split(e.Bridge.Stderr(), "\n") {
			if strings.Contains(l, "[WARN]") && strings.Contains(l, "matched no rule") {
				warn = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(warn, "session="+string(sid)) || !strings.Contains(warn, `\"event\":\"done\"`) {
		t.Errorf("WARN line %q does not name session %s and the frame", warn, sid)
	}
	if log := e.Bridge.Stderr(); !strings.Contains(log, "[INFO]  acp-bridge: turn started: session="+string(sid)) {
		t.Errorf("no INFO 'turn started' line:\n%s", log)
	}
	// Then the turn's quiet (300 ms here) runs out with no matched frame.
	waitFor(t, "the WARN line for the quiet turn", func() bool {
		for _, l := range strings.Split(e.Bridge.Stderr(), "\n") {
			if strings.Contains(l, "[WARN]") && strings.Contains(l, "turn without a frame the profile matched") &&
				strings.Contains(l, "session="+string(sid)) && strings.Contains(l, `\"event\":\"done\"`) {
				return true
			}
		}
		return false
	})
}

// A stop naming a job no turn has (the cancel block's constant 999) is
// refused by the agent with an error frame naming 999: that is the refusal
// of the stop, not a late frame of another turn (issue 54). The prompt is
// answered cancelled at once, not when the job ends; nothing of the job
// reaches the editor after that; the refusal is logged at WARN.
func TestRules_StopNamingNoJobRefused(t *testing.T) {
	t.Parallel()
	e := jobqEditor(t, "done")
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	go func() { _, _ = e.Prompt(context.Background(), sid, "long job") }()
	waitFor(t, "the first progress", func() bool {
		got, _ := updates(e, sid, -1)
		return len(got) > 0
	})
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	stderrLine(t, e, "the WARN line for the refused stop", "[WARN]", "refused the cancel", "no running job 999")
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("cancelled prompt answered %s, want stopReason cancelled", resp)
	}
	// The job runs on for up to a second; its frames are dropped.
	time.Sleep(1200 * time.Millisecond)
	all, _ := updates(e, sid, -1)
	before, _ := updates(e, sid, resp.N)
	if late := all[len(before):]; len(late) > 0 {
		t.Errorf("%d updates after the cancelled answer, want none: %q", len(late), late)
	}
	if len(before) >= 10 {
		t.Errorf("the prompt was answered after the whole job (%d progress updates), not at the refusal", len(before))
	}
}

// The editor refuses a job's question, which ends the turn (the
// permission's reject_ends_turn default): the agent, told by the reject
// frame, reports the refused call itself ({"op":"tool",…,"status":
// "denied","output":"user said no"}), and that report reaches the editor
// as an update of the call before the prompt's answer, which is end_turn
// (issue 54, item 6). Driven by acp-go-sdk's client through the built
// binary; the SDK sees the same update the stdout line holds.
func TestRules_RefusedToolKeepsAgentReport(t *testing.T) {
	t.Parallel()
	e := jobqEditor(t, "done")
	e.Fake.OnPermission(func(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		for _, o := range p.Options {
			if o.Kind == acp.PermissionOptionKindRejectOnce {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
			}
		}
		return acp.RequestPermissionResponse{}, fmt.Errorf("no reject_once option in %+v", p.Options)
	})
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	start := time.Now()
	r, err := e.Prompt(ctxT(t), sid, "delete tmp")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	if r.StopReason != acp.StopReasonEndTurn {
		t.Errorf("refused prompt ended %q, want end_turn", r.StopReason)
	}
	if n := len(e.Fake.Permissions()); n != 1 {
		t.Fatalf("%d permission requests, want 1", n)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	var report, failed, completed int // stdout line numbers (0: none)
	for _, l := range e.Out.Lines() {
		u := l.Get("params.update")
		if l.Method() != "session/update" || u.Get("toolCallId").Str != "t1" {
			continue
		}
		switch {
		case u.Get("content.#(content.text==\"user said no\")").Exists():
			report = l.N
		case u.Get("status").Str == "failed":
			failed = l.N
		case u.Get("status").Str == "completed":
			completed = l.N
		}
	}
	if report == 0 {
		t.Fatalf("the agent's report of the refused call (output \"user said no\") never reached the editor; stdout: %q", e.Out.Lines())
	}
	if report > resp.N {
		t.Errorf("the agent's report of the refused call came after the prompt's answer (stdout lines %d, %d)", report, resp.N)
	}
	if failed == 0 || failed > report || completed != 0 {
		t.Errorf("the refused call: failed at line %d, report at %d, completed at %d; want it failed before the report and never completed", failed, report, completed)
	}
	seen := false
	for _, u := range e.Fake.Updates(sid) {
		if tc := u.Update.ToolCallUpdate; tc != nil && tc.ToolCallId == "t1" {
			for _, c := range tc.Content {
				if c.Content != nil && c.Content.Content.Text != nil && c.Content.Content.Text.Text == "user said no" {
					seen = true
				}
			}
		}
	}
	if !seen {
		t.Errorf("the SDK client got no tool_call_update of t1 with the agent's output")
	}
	t.Logf("refused prompt answered in %v (the agent's own end; the bridge waits at most reject_report_wait after a report)", took)
}

// An agent that pings every 300 ms while a turn hangs (a typo in the done
// rule) does not keep the turn from its quiet WARN, which names the frame
// no rule matched and comes once, nor from give_up (issue 54).
func TestRules_PingsDoNotDefeatGiveUp(t *testing.T) {
	t.Parallel()
	e := jobqEditor(t, "dnoe")
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	go func() { _, _ = e.Prompt(context.Background(), sid, "hang") }()
	waitFor(t, "the prompt", func() bool { return e.In.LastID("session/prompt") != "" })
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	if msg := resp.Get("error.message").Str; !strings.Contains(msg, "given up") || !strings.Contains(msg, `"op":"done"`) {
		t.Fatalf("the hung prompt was answered %s, want it given up naming the unmatched done frame", resp)
	}
	quiet := 0
	for _, l := range strings.Split(e.Bridge.Stderr(), "\n") {
		if strings.Contains(l, "[WARN]") && strings.Contains(l, "turn without a frame the profile matched") {
			quiet++
			if !strings.Contains(l, `\"op\":\"done\"`) {
				t.Errorf("quiet WARN %q does not name the frame no rule matched", l)
			}
		}
	}
	if quiet != 1 {
		t.Errorf("%d quiet WARN lines, want 1:\n%s", quiet, e.Bridge.Stderr())
	}
}

// A profile whose agent has no chat history (jobs, commands) says so with
// history_preamble = false: a session closed and resumed, which opens a
// new agent session, does not send the agent the transcript before the
// next prompt, where a command-style agent would run the old asks again
// (issue 54). Without the setting the same steps do send it, which shows
// the test sees the preamble when there is one.
func TestRules_ProfileWithoutHistoryGetsNoPreamble(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, setting string
		preamble      bool
	}{{"history_preamble=false", "history_preamble = false", false}, {"default", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := t.TempDir() + "/jobq.hcl"
			profile := strings.Replace(jobqProfile, "DONE", "done", 1)
			profile = strings.Replace(profile, `dialect "jobq" {`, "dialect \"jobq\" {\n  "+tc.setting, 1)
			if err := os.WriteFile(cfg, []byte(profile), 0o600); err != nil {
				t.Fatal(err)
			}
			e := NewEditor(t, WSTransport(fakerules.Jobq), EditorOptions{Args: []string{
				"--dialect", "jobq", "--config", cfg, "--state-dir", t.TempDir(), "--log-level", "info"}})
			e.Initialize(t)
			cwd := t.TempDir()
			sid := e.NewSession(t, cwd)
			resp, got := turn(t, e, sid, "echo delete everything")
			wantTurn(t, "first job", resp, got, []string{"message ran: echo delete everything"})
			if l := e.RawCall(t, "session/close", fmt.Sprintf(`{"sessionId":%q}`, sid)); !l.Get("result").IsObject() {
				t.Fatalf("session/close = %s", l)
			}
			if l := e.RawCall(t, "session/resume", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd)); !l.Get("result").IsObject() {
				t.Fatalf("session/resume = %s", l)
			}
			resp, got = turn(t, e, sid, "echo list")
			if tc.preamble {
				if len(got) != 1 || !strings.Contains(got[0], "delete everything") || !strings.HasSuffix(got[0], "echo list") {
					t.Fatalf("without history_preamble = false the resumed job should carry the transcript; the agent ran %q (%s)", got, resp)
				}
				return
			}
			wantTurn(t, "job after resume", resp, got, []string{"message ran: echo list"})
		})
	}
}

// A trace of a rule profile's agent names every agent frame by the rule
// that took it (an event's name, the reply's request, the connect and
// error blocks), so that trace view labels its arrows with them rather
// than "frame" (issue 54); a frame no rule took has none.
func TestRules_TraceNamesTheRule(t *testing.T) {
	t.Parallel()
	cfg := t.TempDir() + "/jobq.hcl"
	if err := os.WriteFile(cfg, []byte(strings.Replace(jobqProfile, "DONE", "done", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/jobq.trace"
	e := NewEditor(t, WSTransport(fakerules.Jobq), EditorOptions{Args: []string{
		"--dialect", "jobq", "--config", cfg, "--no-sessions", "--trace", path}})
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	resp, got := turn(t, e, sid, "echo this")
	wantTurn(t, "echo", resp, got, []string{"message ran: echo this"})
	stopBridge(t, e.Bridge)
	recs, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, r := range recs {
		if r.Hop == "agent" && r.Dir == "in" {
			rules = append(rules, gjson.GetBytes(r.Msg, "op").Str+"="+r.Rule)
		}
	}
	if want := []string{"progress=progress", "done=done"}; !slices.Equal(rules, want) {
		t.Errorf("the agent frames' rules in the trace are %q, want %q", rules, want)
	}
}
