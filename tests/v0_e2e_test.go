package tests

// Scenarios for the acp-v0 dialect (the original Zed ACP 0.0.x, as Gemini CLI
// 0.1.13–0.1.20 speaks it with --experimental-acp;
// docs/agent-protocols.md#acp-v0). The agent is tests/fakeagent/v0, run as
// child processes of the bridge (one control process at initialize, one more
// per session/new) or, in one scenario, behind a WebSocket. The editor is
// acp-go-sdk's client; the harness checks every stdout line against the ACP
// schema. What the legacy agents received is read back from their journals, so
// the tests assert the exact legacy frames the bridge sent, and every journal
// must be free of protocol violations (ids from 0, no notifications, no params
// on parameterless methods, no answer to an unknown id).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	fakev0 "github.com/acp-bridge/acp-bridge/tests/fakeagent/v0"
)

func init() {
	ChildAgents["acp-v0"] = fakev0.RunStdio
}

// v0InitializeFrame is the legacy initialize every agent process must get
// first (docs/agent-protocols.md#acp-v0-captured-session, with ids counted from 0).
const v0InitializeFrame = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`

// v0Options shape a v0Editor.
type v0Options struct {
	// ws serves the fake agent over a WebSocket instead of child processes.
	ws bool
	// noFS leaves the fs capabilities out of the editor's initialize.
	noFS bool
	// unauthenticated makes the agent answer isAuthenticated false.
	unauthenticated bool
	// args are extra bridge flags.
	args []string
}

// v0Editor is an Editor in front of fake legacy agents.
type v0Editor struct {
	*Editor
	journalDir string
}

// newV0Editor starts a bridge with --dialect acp-v0 in front of the fake
// legacy agent. Its cleanup, which runs after the bridge has exited, fails
// the test on any protocol violation a fake agent recorded and on any agent
// that did not end.
func newV0Editor(t *testing.T, o v0Options) *v0Editor {
	t.Helper()
	dir := t.TempDir()
	// Registered before NewEditor, so it runs after the bridge's cleanup.
	t.Cleanup(func() { v0CheckJournals(t, dir) })
	var tr Transport
	if o.ws {
		tr = WSTransport(fakev0.ServeFunc(dir, o.unauthenticated))
	} else {
		tr = Transport{Name: "child", Start: func(t *testing.T) Agent {
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			env := []string{
				"FAKE_AGENT=acp-v0",
				fakev0.EnvJournal + "=" + dir,
				// A -race binary otherwise sleeps 1 s at exit.
				"GORACE=atexit_sleep_ms=0",
			}
			if o.unauthenticated {
				env = append(env, fakev0.EnvUnauthenticated+"=1")
			}
			return Agent{Args: []string{"--", exe}, Env: env}
		}}
	}
	args := append([]string{"--dialect", "acp-v0", "--log-level", "debug"}, o.args...)
	e := NewEditor(t, tr, EditorOptions{Args: args, NoFS: o.noFS})
	return &v0Editor{Editor: e, journalDir: dir}
}

// v0CheckJournals fails t for every violation recorded and for every agent
// that neither saw its input end nor crashed on purpose.
func v0CheckJournals(t *testing.T, dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		js, err := fakev0.ReadJournals(dir)
		if err != nil {
			t.Errorf("reading agent journals: %v", err)
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
				t.Errorf("fake agent (%s) never saw its input end after the bridge exited", r)
			}
			for _, j := range js {
				for _, v := range j.Violations() {
					t.Errorf("fake agent pid %d cwd %s: %s", j.Pid, j.Cwd, v)
				}
				if t.Failed() {
					t.Logf("journal %s:\n  received:\n\t%s\n  events: %q", j.File, strings.Join(j.Received, "\n\t"), j.Events)
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// journals returns the agents' journals, oldest first.
func (e *v0Editor) journals(t *testing.T) []fakev0.Journal {
	t.Helper()
	js, err := fakev0.ReadJournals(e.journalDir)
	if err != nil {
		t.Fatalf("reading agent journals: %v", err)
	}
	return js
}

// journalIn waits for the journal of the agent running in cwd to satisfy
// cond, and returns it.
func (e *v0Editor) journalIn(t *testing.T, cwd string, what string, cond func(fakev0.Journal) bool) fakev0.Journal {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		var last fakev0.Journal
		found := 0
		for _, j := range e.journals(t) {
			if sameDir(j.Cwd, cwd) {
				last = j
				found++
			}
		}
		if found > 1 {
			t.Fatalf("%d agents run in %s, want 1", found, cwd)
		}
		if found == 1 && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent in %s: %s did not happen within %v; received %q, events %q", cwd, what, WaitTimeout, last.Received, last.Events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hasLine reports whether j received exactly line.
func hasLine(j fakev0.Journal, line string) bool { return slices.Contains(j.Received, line) }

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// updates summarises, in stdout order, the session/update lines for sid
// written before line limit (every line when limit < 0): "thought TEXT",
// "message TEXT", "tool_call STATUS KIND", "tool_call_update STATUS",
// "plan ENTRIES".
func updates(e *Editor, sid acp.SessionId, limit int) (sums []string, toolIDs []string) {
	for _, l := range e.Out.Lines() {
		if l.Method() != "session/update" || l.Get("params.sessionId").Str != string(sid) || (limit >= 0 && l.N > limit) {
			continue
		}
		u := l.Get("params.update")
		switch kind := u.Get("sessionUpdate").Str; kind {
		case "agent_thought_chunk":
			sums = append(sums, "thought "+u.Get("content.text").Str)
		case "agent_message_chunk":
			sums = append(sums, "message "+u.Get("content.text").Str)
		case "tool_call":
			sums = append(sums, "tool_call "+u.Get("status").Str+" "+u.Get("kind").Str)
			toolIDs = append(toolIDs, u.Get("toolCallId").Str)
		case "tool_call_update":
			sums = append(sums, "tool_call_update "+u.Get("status").Str)
			toolIDs = append(toolIDs, u.Get("toolCallId").Str)
		case "plan":
			sums = append(sums, "plan "+u.Get("entries").Raw)
		default:
			sums = append(sums, kind)
		}
	}
	return sums, toolIDs
}

// promptLine sends a session/prompt with raw prompt blocks outside the SDK
// and returns its raw id; the SDK still receives the session's updates.
func promptLine(t *testing.T, e *Editor, sid acp.SessionId, blocks string) string {
	t.Helper()
	return e.RawSend(t, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":%s}`, sid, blocks))
}

func textBlocks(text string) string {
	return `[{"type":"text","text":` + jsonQuote(text) + `}]`
}

// jsonQuote returns s as a JSON string.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// wantEndTurnAfterUpdates asserts the prompt answered by line resp ended the
// turn and that the updates want came, in this order, before it.
func wantEndTurnAfterUpdates(t *testing.T, e *Editor, sid acp.SessionId, resp Line, want []string) (toolIDs []string) {
	t.Helper()
	if got := resp.Get("result.stopReason").Str; got != "end_turn" {
		t.Fatalf("prompt answer = %s, want stopReason end_turn", resp)
	}
	got, ids := updates(e, sid, resp.N)
	if !slices.Equal(got, want) {
		t.Errorf("updates before the prompt answer:\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	return ids
}

// Initialize, a session and two turns: the legacy handshake per process, the
// translated streaming and plan, and the exact legacy frames.
func TestV0_InitializeSessionStreamingPlan(t *testing.T) {
	t.Parallel()
	// Sessions off: this pins the legacy agent's own capabilities.
	e := newV0Editor(t, v0Options{args: []string{"--no-sessions"}})
	res := e.Initialize(t)
	if res.ProtocolVersion != 1 {
		t.Errorf("protocolVersion = %d, want 1", res.ProtocolVersion)
	}
	caps := res.AgentCapabilities
	if caps.LoadSession || caps.PromptCapabilities.Image || caps.PromptCapabilities.Audio {
		t.Errorf("agentCapabilities = %+v; a legacy agent loads no sessions and takes no images or audio", caps)
	}
	if caps.SessionCapabilities.Close == nil {
		t.Errorf("sessionCapabilities.close absent; session/close ends the session's agent process")
	}
	if caps.SessionCapabilities.List != nil || caps.SessionCapabilities.Resume != nil {
		t.Errorf("sessionCapabilities = %+v; a legacy agent can neither list nor resume", caps.SessionCapabilities)
	}
	if len(res.AuthMethods) != 0 {
		t.Errorf("authMethods = %+v; the agent is authenticated", res.AuthMethods)
	}
	if res.AgentInfo == nil || res.AgentInfo.Name != "acp-bridge" {
		t.Errorf("agentInfo = %+v, want acp-bridge", res.AgentInfo)
	}

	// One control process, which got the legacy initialize (and whose
	// "Data collection is disabled." stdout line the bridge skipped).
	js := e.journals(t)
	if len(js) != 1 {
		t.Fatalf("%d agent processes after initialize, want 1 (control)", len(js))
	}
	control := js[0]
	if len(control.Received) != 1 || control.Received[0] != v0InitializeFrame {
		t.Errorf("control agent received %q, want exactly %s", control.Received, v0InitializeFrame)
	}

	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)
	if !strings.HasPrefix(string(sid), "sess-") {
		t.Errorf("sessionId = %q, want one the bridge minted (sess-…)", sid)
	}
	sj := e.journalIn(t, cwd, "initialize", func(j fakev0.Journal) bool { return len(j.Received) > 0 })
	if sj.Pid == control.Pid || sj.Transport != "stdio" {
		t.Errorf("session agent pid %d (%s), control pid %d: want a new child process", sj.Pid, sj.Transport, control.Pid)
	}
	if sj.Received[0] != v0InitializeFrame {
		t.Errorf("session agent's first frame = %s, want %s", sj.Received[0], v0InitializeFrame)
	}

	r, err := e.Prompt(ctxT(t), sid, "hello <there> & more")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	wantEndTurnAfterUpdates(t, e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")), []string{
		"thought Let me check",
		"message You said: ",
		"message hello <there> & more",
	})

	r, err = e.Prompt(ctxT(t), sid, "plan")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("plan prompt = %+v, %v; want end_turn", r, err)
	}
	got, _ := updates(e.Editor, sid, -1)
	if want := []string{"plan " + fakev0.PlanEntries, "message Plan made."}; !slices.Equal(got[3:], want) {
		t.Errorf("plan turn updates = %q, want %q", got[3:], want)
	}

	sj = e.journalIn(t, cwd, "both turns", func(j fakev0.Journal) bool { return len(j.Requests("sendUserMessage")) == 2 })
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"sendUserMessage","params":{"chunks":[{"text":"hello <there> & more"}]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"sendUserMessage","params":{"chunks":[{"text":"plan"}]}}`,
	} {
		if !hasLine(sj, want) {
			t.Errorf("session agent never received %s; received %q", want, sj.Requests("sendUserMessage"))
		}
	}
	// Every chunk was answered with null (docs/agent-protocols.md#acp-v0-framing).
	e.journalIn(t, cwd, "chunk answers", func(j fakev0.Journal) bool {
		return hasLine(j, `{"jsonrpc":"2.0","id":0,"result":null}`) && hasLine(j, `{"jsonrpc":"2.0","id":2,"result":null}`) &&
			hasLine(j, `{"jsonrpc":"2.0","id":3,"result":null}`)
	})
	if n := len(e.journals(t)); n != 2 {
		t.Errorf("%d agent processes, want 2 (control + one session)", n)
	}
}

// The captured approval flow (docs/agent-protocols.md#acp-v0-captured-session)
// with the editor allowing, always allowing, and rejecting.
func TestV0_Permission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		option string
		want   []string
	}{
		{"allow", []string{
			"thought Let me check", "message I will run a command.", "tool_call pending execute",
			"tool_call_update in_progress", "tool_call_update completed", "thought Thinking about result", "message Done.",
		}},
		{"alwaysAllow", []string{
			"thought Let me check", "message I will run a command.", "tool_call pending execute",
			"tool_call_update in_progress", "tool_call_update completed", "thought Thinking about result", "message Done.",
		}},
		// Gemini sends no updateToolCall after a refusal: the bridge must
		// close the tool call itself.
		{"reject", []string{
			"thought Let me check", "message I will run a command.", "tool_call pending execute",
			"tool_call_update failed", "message " + fakev0.RejectedText,
		}},
	} {
		t.Run(tc.option, func(t *testing.T) {
			t.Parallel()
			e := newV0Editor(t, v0Options{})
			e.Fake.OnPermission(func(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(tc.option))}, nil
			})
			e.Initialize(t)
			cwd := t.TempDir()
			sid := e.NewSession(t, cwd)
			r, err := e.Prompt(ctxT(t), sid, "run echo please")
			if err != nil || r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
			}
			ids := wantEndTurnAfterUpdates(t, e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")), tc.want)
			for _, id := range ids {
				if id != ids[0] || id == "" {
					t.Errorf("tool call ids %q: want one tool call", ids)
					break
				}
			}

			perms := e.Fake.Permissions()
			if len(perms) != 1 {
				t.Fatalf("editor got %d permission requests, want 1", len(perms))
			}
			p := perms[0]
			if p.SessionId != sid || len(ids) == 0 || string(p.ToolCall.ToolCallId) != ids[0] {
				t.Errorf("permission request for session %s tool %s; want %s, %v", p.SessionId, p.ToolCall.ToolCallId, sid, ids)
			}
			if p.ToolCall.Title == nil || !strings.Contains(*p.ToolCall.Title, "echo hi-from-tool") {
				t.Errorf("permission title %v does not show the command", p.ToolCall.Title)
			}
			var opts []string
			for _, o := range p.Options {
				opts = append(opts, string(o.OptionId)+"/"+string(o.Kind))
			}
			if want := []string{"allow/allow_once", "alwaysAllow/allow_always", "reject/reject_once"}; !slices.Equal(opts, want) {
				t.Errorf("permission options = %q, want %q", opts, want)
			}
			// The pending tool_call reached the editor before the question.
			call, _ := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.sessionUpdate").Str == "tool_call" })
			ask, _ := e.Out.Find(time.Second, func(l Line) bool { return l.Method() == "session/request_permission" })
			if call.N > ask.N {
				t.Errorf("tool_call (line %d) after session/request_permission (line %d)", call.N, ask.N)
			}
			if tc.option != "reject" {
				if u, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.status").Str == "completed" }); !ok ||
					u.Get("params.update.content.0.content.text").Str != fakev0.ToolOutput {
					t.Errorf("completed update = %s, want the markdown %q as text content", u, fakev0.ToolOutput)
				}
			}

			// The legacy agent got the confirmation answer with the id the
			// bridge allocated (≥ 1) and the chosen outcome.
			want := `{"jsonrpc":"2.0","id":2,"result":{"id":1,"outcome":"` + tc.option + `"}}`
			j := e.journalIn(t, cwd, "confirmation answer", func(j fakev0.Journal) bool { return hasLine(j, want) })
			if !j.HasEvent("outcome " + tc.option) {
				t.Errorf("agent events %q, want outcome %s", j.Events, tc.option)
			}
		})
	}
}

// A file:// resource_link becomes a legacy {path} chunk; the agent reads the
// file itself and announces it with pushToolCall
// (docs/agent-protocols.md#acp-v0-captured-session).
func TestV0_PathChunk(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{})
	e.Initialize(t)
	cwd := t.TempDir()
	path := filepath.Join(cwd, "a.txt")
	if err := os.WriteFile(path, []byte("alpha beta"), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := e.NewSession(t, cwd)
	uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
	r, err := e.Conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{
		acp.TextBlock("summarize "), acp.ResourceLinkBlock("a.txt", uri),
	}})
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	ids := wantEndTurnAfterUpdates(t, e.Editor, sid, resp, []string{
		"tool_call in_progress search", "tool_call_update completed", "message The file says: alpha beta",
	})
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("tool call ids %q, want one tool call", ids)
	}
	if u, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.status").Str == "completed" }); !ok ||
		!strings.Contains(u.Get("params.update.content.0.content.text").Str, "alpha beta") {
		t.Errorf("completed update = %s, want the agent's read result", u)
	}

	want := `{"jsonrpc":"2.0","id":1,"method":"sendUserMessage","params":{"chunks":[{"text":"summarize "},{"path":` + jsonQuote(path) + `}]}}`
	j := e.journalIn(t, cwd, "the path prompt", func(j fakev0.Journal) bool { return len(j.Requests("sendUserMessage")) == 1 })
	if got := j.Requests("sendUserMessage")[0]; got != want {
		t.Errorf("agent received\n\t%s\nwant\n\t%s", got, want)
	}
	if !j.HasEvent("path " + path) {
		t.Errorf("agent events %q, want path %s", j.Events, path)
	}
	e.journalIn(t, cwd, "pushToolCall answer", func(j fakev0.Journal) bool {
		return hasLine(j, `{"jsonrpc":"2.0","id":0,"result":{"id":1}}`)
	})
}

// readTextFile/writeTextFile go to an editor that advertised fs, with paths
// made absolute against the session cwd; the disk is not touched.
func TestV0_FSThroughEditor(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{})
	cwd := t.TempDir()
	notes := filepath.Join(cwd, "notes.txt")
	if err := os.WriteFile(notes, []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Fake.SetFile(notes, "from the editor buffer")
	e.Initialize(t)
	sid := e.NewSession(t, cwd)
	r, err := e.Prompt(ctxT(t), sid, "fs")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	wantEndTurnAfterUpdates(t, e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")), []string{
		"message read notes.txt: from the editor buffer", "message wrote out.txt",
	})
	reads, writes := e.Fake.Reads(), e.Fake.Writes()
	if len(reads) != 1 || reads[0].Path != notes || reads[0].SessionId != sid {
		t.Errorf("editor reads = %+v, want one of %s", reads, notes)
	}
	out := filepath.Join(cwd, "out.txt")
	if len(writes) != 1 || writes[0].Path != out || writes[0].SessionId != sid || writes[0].Content != fakev0.WrittenPrefix+"from the editor buffer" {
		t.Errorf("editor writes = %+v, want one of %s", writes, out)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s is on disk although the editor serves fs (stat: %v)", out, err)
	}
	e.journalIn(t, cwd, "fs answers", func(j fakev0.Journal) bool {
		return hasLine(j, `{"jsonrpc":"2.0","id":0,"result":{"content":"from the editor buffer"}}`) &&
			hasLine(j, `{"jsonrpc":"2.0","id":2,"result":null}`)
	})
}

// Without the editor's fs capability the bridge serves the legacy file calls
// from disk, confined to the session cwd.
func TestV0_FSDiskFallback(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{noFS: true})
	base := t.TempDir()
	cwd := filepath.Join(base, "project")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(base, "outside.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Initialize(t)
	sid := e.NewSession(t, cwd)

	r, err := e.Prompt(ctxT(t), sid, "fs")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	wantEndTurnAfterUpdates(t, e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")), []string{
		"message read notes.txt: from disk", "message wrote out.txt",
	})
	if b, err := os.ReadFile(filepath.Join(cwd, "out.txt")); err != nil || string(b) != fakev0.WrittenPrefix+"from disk" {
		t.Errorf("out.txt = %q, %v; want %q", b, err, fakev0.WrittenPrefix+"from disk")
	}

	// Relative and absolute paths leaving the cwd are refused to the agent.
	for _, paths := range [][2]string{
		{"../outside.txt", "../escaped.txt"},
		{outside, filepath.Join(base, "escaped-abs.txt")},
	} {
		before := len(e.Fake.Chunks(sid))
		r, err := e.Prompt(ctxT(t), sid, "fs "+paths[0]+" "+paths[1])
		if err != nil || r.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
		}
		chunks := e.Fake.Chunks(sid)[before:]
		if len(chunks) != 2 || !strings.HasPrefix(chunks[0], "read "+paths[0]+" failed: ") || !strings.HasPrefix(chunks[1], "write "+paths[1]+" failed: ") {
			t.Errorf("chunks = %q, want the read and the write of %q refused", chunks, paths)
		}
		if strings.Contains(strings.Join(chunks, "\n"), "secret") {
			t.Errorf("a file outside the session cwd leaked: %q", chunks)
		}
	}
	for _, name := range []string{"escaped.txt", "escaped-abs.txt"} {
		if _, err := os.Stat(filepath.Join(base, name)); !os.IsNotExist(err) {
			t.Errorf("%s was written outside the session cwd (stat: %v)", name, err)
		}
	}

	reads, writes := e.Fake.Reads(), e.Fake.Writes()
	if len(reads)+len(writes) != 0 {
		t.Errorf("editor without the fs capability got fs calls: %v %v", reads, writes)
	}
	for _, l := range e.Out.Lines() {
		if strings.HasPrefix(l.Method(), "fs/") {
			t.Errorf("fs request sent to an editor without the capability: %s", l)
		}
	}
}

// session/cancel becomes cancelSendMessage; the legacy "aborted" error ends
// the prompt with stopReason cancelled, well before the grace period; the
// session takes the next prompt; an idle cancel's error is swallowed.
func TestV0_CancelMidTurn(t *testing.T) {
	t.Parallel()
	const grace = 8 * time.Second
	e := newV0Editor(t, v0Options{args: []string{"--cancel-grace", grace.String()}})
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)

	done := promptAsync(context.Background(), e.Editor, sid, "slow")
	waitUntil(t, WaitTimeout, "the first tick", func() bool { return len(e.Fake.Chunks(sid)) > 0 })
	start := time.Now()
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	r := await(t, done, "cancelled prompt")
	if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
		t.Fatalf("cancelled prompt = %+v, %v; want stopReason cancelled", r.res, r.err)
	}
	if d := r.at.Sub(start); d > grace/2 {
		t.Errorf("cancelled answer took %v: the legacy abort was not translated (grace %v)", d, grace)
	}
	j := e.journalIn(t, cwd, "cancelSendMessage", func(j fakev0.Journal) bool { return j.HasEvent("cancel") })
	if got := j.Requests("cancelSendMessage"); len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":2,"method":"cancelSendMessage"}` {
		t.Errorf("agent received cancels %q, want exactly one without params", got)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	time.Sleep(200 * time.Millisecond)
	for _, l := range e.Out.Lines() {
		if l.N > resp.N && l.Method() == "session/update" {
			t.Errorf("update after the cancelled answer: %s", l)
		}
	}

	// The session still works, and a cancel with nothing running reaches
	// the agent but its "Not currently generating" error stays there.
	res, err := e.Prompt(ctxT(t), sid, "again")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after cancel = %+v, %v; want end_turn", res, err)
	}
	n := e.Out.Len()
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	e.journalIn(t, cwd, "idle cancel", func(j fakev0.Journal) bool { return j.HasEvent("cancel while idle") })
	time.Sleep(200 * time.Millisecond)
	for _, l := range e.Out.Lines()[n:] {
		t.Errorf("stdout line after an idle cancel: %s", l)
	}
}

// Two sessions are two agent processes in their own cwds; their turns run at
// the same time without mixing; closing one ends its process only.
func TestV0_TwoSessions(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{})
	e.Initialize(t)
	cwdA, cwdB := filepath.Join(t.TempDir(), "alpha"), filepath.Join(t.TempDir(), "beta")
	for _, d := range []string{cwdA, cwdB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := e.NewSession(t, cwdA)
	b := e.NewSession(t, cwdB)
	if a == b {
		t.Fatalf("two sessions share id %s", a)
	}
	ja := e.journalIn(t, cwdA, "start", func(fakev0.Journal) bool { return true })
	jb := e.journalIn(t, cwdB, "start", func(fakev0.Journal) bool { return true })
	js := e.journals(t)
	if len(js) != 3 || ja.Pid == jb.Pid || js[0].Pid == ja.Pid || js[0].Pid == jb.Pid {
		t.Fatalf("agents: %d journals, pids control %d, A %d, B %d; want three processes", len(js), js[0].Pid, ja.Pid, jb.Pid)
	}

	idA := promptLine(t, e.Editor, a, textBlocks("stream 15"))
	idB := promptLine(t, e.Editor, b, textBlocks("stream 15"))
	respA, respB := e.Out.Response(t, idA), e.Out.Response(t, idB)
	var wantA, wantB []string
	for i := 1; i <= 15; i++ {
		wantA = append(wantA, fmt.Sprintf("message alpha#%d ", i))
		wantB = append(wantB, fmt.Sprintf("message beta#%d ", i))
	}
	wantEndTurnAfterUpdates(t, e.Editor, a, respA, wantA)
	wantEndTurnAfterUpdates(t, e.Editor, b, respB, wantB)
	// The turns overlapped: each session streamed before the other ended.
	firstA, _ := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.sessionId").Str == string(a) && l.Method() == "session/update" })
	firstB, _ := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.sessionId").Str == string(b) && l.Method() == "session/update" })
	if firstA.N > respB.N || firstB.N > respA.N {
		t.Errorf("turns did not overlap: A streamed from line %d and ended at %d, B from %d to %d", firstA.N, respA.N, firstB.N, respB.N)
	}

	if _, err := e.Conn.CloseSession(ctxT(t), acp.CloseSessionRequest{SessionId: a}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	e.journalIn(t, cwdA, "the end of A's process", func(j fakev0.Journal) bool { return j.HasEvent("eof") })
	waitUntil(t, WaitTimeout, "A's process to exit", func() bool { return processGone(ja.Pid) })
	if processGone(jb.Pid) {
		t.Errorf("closing session A ended B's process")
	}
	if res, err := e.Prompt(ctxT(t), b, "still here"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Errorf("prompt to B after A closed = %+v, %v", res, err)
	}
	if _, err := e.Prompt(ctxT(t), a, "hello"); err == nil {
		t.Errorf("prompt to closed session A succeeded")
	} else if re := requestError(t, err); re.Code != -32002 {
		// (A closed session is not found until it is loaded or resumed:
		// docs/sessions.md.)
		t.Errorf("prompt to closed session A: code %d, want -32002", re.Code)
	}
}

// An agent process that dies mid-turn fails the prompt with a -32603 naming
// its exit status, promptly; new sessions still work.
func TestV0_AgentCrashMidTurn(t *testing.T) {
	t.Parallel()
	testV0Crash(t, "crash")
}

// The agent exits without waiting for the bridge's answer to its last
// chunk, so that answer's write races the exit and may hit a broken pipe:
// the editor must still learn the exit status, not "broken pipe".
func TestV0_AgentCrashBeforeAnswer(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			testV0Crash(t, "crash-now")
		})
	}
}

func testV0Crash(t *testing.T, script string) {
	// Sessions off: with them on, the next prompt re-attaches (sessions_e2e_test.go).
	e := newV0Editor(t, v0Options{args: []string{"--no-sessions"}})
	e.Initialize(t)
	sid := e.NewSession(t, "")
	start := time.Now()
	r := await(t, promptAsync(ctxT(t), e.Editor, sid, script), "prompt to a crashing agent")
	if r.err == nil {
		t.Fatalf("prompt succeeded (%+v) although the agent died", r.res)
	}
	if d := r.at.Sub(start); d > 3*time.Second {
		t.Errorf("error came %v after the prompt; want promptly", d)
	}
	l := e.Out.Response(t, e.In.LastID("session/prompt"))
	if code, _ := l.ErrorCode(); code != -32603 || !strings.Contains(l.Get("error").Raw, "agent process exited with status 3") {
		t.Errorf("prompt answer = %s, want error -32603 naming exit status 3", l)
	}
	if !slices.Contains(e.Fake.Chunks(sid), "about to crash") {
		t.Errorf("chunk sent before the crash lost: %q", e.Fake.Chunks(sid))
	}
	if _, err := e.Prompt(ctxT(t), sid, "hello"); err == nil {
		t.Errorf("prompt to the dead session succeeded")
	}
	other := e.NewSession(t, "")
	if res, err := e.Prompt(ctxT(t), other, "hello"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Errorf("prompt in a new session after the crash = %+v, %v", res, err)
	}
}

// A legacy error (Gemini's 429) reaches the editor with code and message.
func TestV0_RateLimitPassthrough(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{})
	sid := e.Start(t)
	_, err := e.Prompt(ctxT(t), sid, "429")
	if err == nil {
		t.Fatal("prompt succeeded; want the agent's 429")
	}
	if re := requestError(t, err); re.Code != 429 || re.Message != "Rate limit exceeded. Try again later." {
		t.Errorf("error = %d %q, want 429 %q", re.Code, re.Message, "Rate limit exceeded. Try again later.")
	}
	if got := e.Out.Response(t, e.In.LastID("session/prompt")).Get("error").Raw; got != fakev0.RateLimitError {
		t.Errorf("error object = %s, want %s", got, fakev0.RateLimitError)
	}
}

// Images and audio have no legacy form: -32602, nothing sent to the agent.
func TestV0_ImageAndAudioRefused(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{})
	e.Initialize(t)
	cwd := t.TempDir()
	sid := e.NewSession(t, cwd)
	for _, block := range []acp.ContentBlock{acp.ImageBlock("iVBORw0KGgo=", "image/png"), acp.AudioBlock("UklGRg==", "audio/wav")} {
		_, err := e.Conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("look"), block}})
		if err == nil {
			t.Fatalf("prompt with %+v succeeded", block)
		}
		if re := requestError(t, err); re.Code != -32602 {
			t.Errorf("error code %d, want -32602", re.Code)
		}
	}
	if res, err := e.Prompt(ctxT(t), sid, "ok"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("text prompt = %+v, %v", res, err)
	}
	j := e.journalIn(t, cwd, "the text prompt", func(j fakev0.Journal) bool { return len(j.Requests("sendUserMessage")) > 0 })
	if got := j.Requests("sendUserMessage"); len(got) != 1 || !strings.Contains(got[0], `"id":1,`) {
		t.Errorf("agent received %q, want only the text prompt, as its first request after initialize", got)
	}
}

// isAuthenticated false → one auth method; authenticate runs the legacy
// authenticate (no params) on the control process.
func TestV0_Authenticate(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{unauthenticated: true})
	e.Initialize(t)
	l := e.Out.Response(t, e.In.LastID("initialize"))
	methods := l.Get("result.authMethods").Array()
	if len(methods) != 1 || methods[0].Get("id").Str == "" || methods[0].Get("name").Str == "" {
		t.Fatalf("authMethods = %s, want one method", l.Get("result.authMethods").Raw)
	}
	method := methods[0].Get("id").Str

	_, err := e.Conn.Authenticate(ctxT(t), acp.AuthenticateRequest{MethodId: "no-such-method"})
	if err == nil {
		t.Errorf("authenticate with an unknown method succeeded")
	} else if re := requestError(t, err); re.Code != -32602 {
		t.Errorf("unknown method: code %d, want -32602", re.Code)
	}
	if _, err := e.Conn.Authenticate(ctxT(t), acp.AuthenticateRequest{MethodId: method}); err != nil {
		t.Fatalf("authenticate %s: %v", method, err)
	}
	js := e.journals(t)
	if len(js) != 1 {
		t.Fatalf("%d agent processes, want the control one only", len(js))
	}
	if got := js[0].Requests("authenticate"); len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"method":"authenticate"}` {
		t.Errorf("control agent received authenticate %q, want exactly one, without params", got)
	}
}

// The dialect works over a WebSocket too: every session is a new connection.
func TestV0_WebSocket(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{ws: true})
	e.Initialize(t)
	cwd := t.TempDir()
	notes := filepath.Join(cwd, "notes.txt")
	e.Fake.SetFile(notes, "ws buffer")
	sid := e.NewSession(t, cwd)
	r, err := e.Prompt(ctxT(t), sid, "run echo please")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v; want end_turn", r, err)
	}
	wantEndTurnAfterUpdates(t, e.Editor, sid, e.Out.Response(t, e.In.LastID("session/prompt")), []string{
		"thought Let me check", "message I will run a command.", "tool_call pending execute",
		"tool_call_update in_progress", "tool_call_update completed", "thought Thinking about result", "message Done.",
	})
	r, err = e.Prompt(ctxT(t), sid, "fs")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("fs prompt = %+v, %v; want end_turn", r, err)
	}
	if c := e.Fake.Chunks(sid); !slices.Contains(c, "read notes.txt: ws buffer") || !slices.Contains(c, "wrote out.txt") {
		t.Errorf("chunks = %q", c)
	}
	reads, writes := e.Fake.Reads(), e.Fake.Writes()
	if len(reads) != 1 || reads[0].Path != notes || len(writes) != 1 || writes[0].Path != filepath.Join(cwd, "out.txt") {
		t.Errorf("editor fs calls: reads %+v writes %+v", reads, writes)
	}
	if n := e.Agent.WS.Dials(); n != 2 {
		t.Errorf("%d WebSocket connections, want 2 (control + session)", n)
	}
	js := e.journals(t)
	if len(js) != 2 {
		t.Fatalf("%d agent connections journaled, want 2", len(js))
	}
	for _, j := range js {
		if j.Transport != "ws" || len(j.Received) == 0 || j.Received[0] != v0InitializeFrame {
			t.Errorf("connection %s (%s) began with %q, want %s", j.File, j.Transport, j.Received, v0InitializeFrame)
		}
	}
	if !hasLine(js[1], `{"jsonrpc":"2.0","id":2,"result":{"id":1,"outcome":"allow"}}`) {
		t.Errorf("session connection never got the allow answer; received %q", js[1].Received)
	}
}
