package tests

// Durable sessions (issue 17): the bridge's own session/list, load, resume,
// close and delete over backends that have none, re-attaching a session
// whose backend is gone, and idle cleanup.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakeclaude "github.com/acp-bridge/acp-bridge/tests/fakeagent/claude"
	fakev0 "github.com/acp-bridge/acp-bridge/tests/fakeagent/v0"
	"github.com/acp-bridge/acp-bridge/translate/claude"
	"github.com/coder/acp-go-sdk"
)

// replayBefore returns the session/update lines for sid written before the
// answer to the request with raw id, as "kind:text" (tool calls as
// "tool:title:status").
func replayBefore(t *testing.T, e *Editor, sid acp.SessionId, id string) []string {
	t.Helper()
	return replaySince(t, e, sid, id, 0)
}

// replaySince is replayBefore counting only the lines from the from'th on.
func replaySince(t *testing.T, e *Editor, sid acp.SessionId, id string, from int) []string {
	t.Helper()
	e.Out.Response(t, id)
	var got []string
	for _, l := range e.Out.Lines()[from:] {
		if l.IsResponse() && l.ID() == id {
			return got
		}
		if l.Method() != "session/update" || l.Get("params.sessionId").Str != string(sid) {
			continue
		}
		u := l.Get("params.update")
		switch kind := u.Get("sessionUpdate").Str; kind {
		case "tool_call", "tool_call_update":
			got = append(got, "tool:"+u.Get("title").Str+":"+u.Get("status").Str)
		default:
			got = append(got, strings.TrimSuffix(kind, "_message_chunk")+":"+u.Get("content.text").Str)
		}
	}
	t.Fatalf("no answer to %s", id)
	return nil
}

// promptWorks runs "stream n" on sid and requires end_turn and the n chunks
// to be the last the editor got for sid. Unlike promptTurn it does not
// count chunks from before the prompt, which a replay may still be
// delivering to the SDK client.
func promptWorks(t *testing.T, e *Editor, sid acp.SessionId, n int) {
	t.Helper()
	res, err := e.Prompt(ctxT(t), sid, fmt.Sprintf("stream %d", n))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt on %s: %+v, %v; want end_turn", sid, res, err)
	}
	got := e.Fake.Chunks(sid)
	want := streamed("", n)[1:]
	for i := range want {
		want[i] = strings.TrimPrefix(want[i], "agent:")
	}
	if len(got) < n || !slices.Equal(got[len(got)-n:], want) {
		t.Errorf("session %s: chunks end %q, want %q", sid, got[max(0, len(got)-n):], want)
	}
}

func streamed(prompt string, n int) []string {
	out := []string{"user:" + prompt}
	for i := range n {
		out = append(out, fmt.Sprintf("agent:chunk-%04d", i))
	}
	return out
}

// journalHas reports whether the agent received a frame containing all of
// parts.
func journalHas(j fakeagent.Journal, parts ...string) bool {
	for _, f := range j.Frames {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(f, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestSessions_ListLoadResumeCloseDeleteAcrossRestarts(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}

	e1 := NewEditor(t, ChildTransport("acp"), args)
	caps := e1.Initialize(t).AgentCapabilities
	if !caps.LoadSession || caps.SessionCapabilities.List == nil || caps.SessionCapabilities.Resume == nil || caps.SessionCapabilities.Close == nil {
		t.Errorf("capabilities %+v: the bridge must advertise loadSession, list, resume and close", caps)
	}
	sid := e1.NewSession(t, cwd)
	promptTurn(t, e1, sid, 3)
	promptTurn(t, e1, sid, 2)
	stopBridge(t, e1.Bridge)

	e2 := NewEditor(t, ChildTransport("acp"), args)
	e2.Initialize(t)
	l := e2.RawCall(t, "session/list", fmt.Sprintf(`{"cwd":%q}`, cwd))
	list := l.Get("result.sessions").Array()
	if len(list) != 1 || list[0].Get("sessionId").Str != string(sid) || list[0].Get("title").Str != "stream 3" ||
		list[0].Get("cwd").Str != cwd || list[0].Get("updatedAt").Str == "" {
		t.Fatalf("session/list = %s, want %s titled \"stream 3\" with updatedAt", l, sid)
	}
	if l := e2.RawCall(t, "session/list", `{"cwd":"/elsewhere"}`); len(l.Get("result.sessions").Array()) != 0 {
		t.Errorf("session/list of another cwd = %s, want none", l)
	}

	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if l := e2.Out.Response(t, id); !l.Get("result").IsObject() {
		t.Fatalf("session/load = %s, want a result", l)
	}
	want := append(streamed("stream 3", 3), streamed("stream 2", 2)...)
	if got := replayBefore(t, e2, sid, id); !slices.Equal(got, want) {
		t.Fatalf("replayed before the load answer:\n got %q\nwant %q", got, want)
	}
	promptWorks(t, e2, sid, 1)
	// The new agent process knows nothing of the session: its first prompt
	// carries the history.
	if j := e2.Journal(t); !journalHas(j, "session/prompt", "User: stream 3", "chunk-0002", "User: stream 2") {
		t.Errorf("the agent's first prompt after load lacks the history preamble; frames: %q", j.Frames)
	}

	if l := e2.RawCall(t, "session/close", fmt.Sprintf(`{"sessionId":%q}`, sid)); !l.Get("result").IsObject() {
		t.Fatalf("session/close = %s", l)
	}
	id = e2.RawSend(t, "session/resume", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if l := e2.Out.Response(t, id); !l.Get("result").IsObject() {
		t.Fatalf("session/resume = %s", l)
	}
	if got := replayBefore(t, e2, sid, id); len(got) != len(want)+1 {
		t.Errorf("resume replayed history: %d updates for the session before its answer, want only the %d seen before", len(got), len(want)+1)
	}
	promptWorks(t, e2, sid, 2)

	if l := e2.RawCall(t, "session/delete", fmt.Sprintf(`{"sessionId":%q}`, sid)); !l.Get("result").IsObject() {
		t.Fatalf("session/delete = %s", l)
	}
	if l := e2.RawCall(t, "session/list", ""); len(l.Get("result.sessions").Array()) != 0 {
		t.Errorf("session/list after delete = %s", l)
	}
	stopBridge(t, e2.Bridge)

	e3 := NewEditor(t, ChildTransport("acp"), args)
	e3.Initialize(t)
	l = e3.RawCall(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if _, isErr := l.ErrorCode(); !isErr {
		t.Fatalf("loading a deleted session = %s, want an error", l)
	}
}

func TestSessions_LoadUsesTheAgentsOwnLoad(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}
	tr := withEnv(ChildTransport("acp"), fakeagent.EnvLoadSession+"=1")

	e1 := NewEditor(t, tr, args)
	e1.Initialize(t)
	sid := e1.NewSession(t, cwd)
	promptTurn(t, e1, sid, 2)
	stopBridge(t, e1.Bridge)

	e2 := NewEditor(t, tr, args)
	e2.Initialize(t)
	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	want := []string{"agent:replayed-by-agent " + string(sid)}
	if got := replayBefore(t, e2, sid, id); !slices.Equal(got, want) {
		t.Fatalf("before the load answer: got %q, want the agent's own replay %q only", got, want)
	}
	if j := e2.Journal(t); !slices.Contains(j.Events, "load:"+string(sid)) {
		t.Fatalf("the agent's own session/load was not used; events %q", j.Events)
	}
	promptWorks(t, e2, sid, 1)
}

// A recorded session the agent cannot load itself any more (it advertises
// loadSession, but answers -32002: it kept its sessions in memory and was
// restarted, or forgot the session when it was closed) is opened as one the
// agent cannot load: the bridge replays its transcript and primes a new
// agent session with the history, as for an agent without session/load
// (issue 52's seam matrix found a v2 agent failing the load after a close).
func TestSessions_AgentsOwnLoadFailsFallsBackToTheTranscript(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}
	tr := withEnv(ChildTransport("acp"), fakeagent.EnvLoadSession+"=known")

	e1 := NewEditor(t, tr, args)
	e1.Initialize(t)
	sid := e1.NewSession(t, cwd)
	promptTurn(t, e1, sid, 2)
	stopBridge(t, e1.Bridge)

	e2 := NewEditor(t, tr, args)
	e2.Initialize(t)
	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if code, isErr := e2.Out.Response(t, id).ErrorCode(); isErr {
		t.Fatalf("session/load failed with %d: %s", code, e2.Out.Response(t, id))
	}
	want := []string{"user:stream 2", "agent:chunk-0000", "agent:chunk-0001"}
	if got := replayBefore(t, e2, sid, id); !slices.Equal(got, want) {
		t.Fatalf("before the load answer: got %q, want the transcript's replay %q", got, want)
	}
	j := e2.Journal(t)
	if !slices.Contains(j.Events, "load:"+string(sid)) {
		t.Errorf("the agent's own session/load was not tried first; events %q", j.Events)
	}
	if !slices.ContainsFunc(j.Events, func(ev string) bool { return strings.HasPrefix(ev, "session:") }) {
		t.Errorf("no new agent session was opened for the history; events %q", j.Events)
	}
	promptWorks(t, e2, sid, 1)
}

// A session closed and loaded again in the same process, over an agent
// that loads (and replays) its own sessions: the agent's replay reaches the
// editor. The updates the agent sends for the closed session's id are
// dropped as late ones until a load of it is under way (issue 52's seam
// matrix found the whole replay dropped, bridge to bridge).
func TestSessions_AgentsOwnLoadAfterCloseReplays(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	tr := withEnv(ChildTransport("acp"), fakeagent.EnvLoadSession+"=1")
	e := NewEditor(t, tr, EditorOptions{Args: []string{"--state-dir", state}})
	e.Initialize(t)
	sid := e.NewSession(t, cwd)
	promptTurn(t, e, sid, 2)
	if r := e.RawCall(t, "session/close", fmt.Sprintf(`{"sessionId":%q}`, sid)); r.Get("error").Exists() {
		t.Fatalf("session/close: %s", r)
	}
	from := len(e.Out.Lines())
	id := e.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	want := []string{"agent:replayed-by-agent " + string(sid)}
	if got := replaySince(t, e, sid, id, from); !slices.Equal(got, want) {
		t.Fatalf("between the load and its answer: got %q, want the agent's own replay %q", got, want)
	}
	promptWorks(t, e, sid, 1)
}

func TestSessions_LoadOverLegacyAgentWithoutLoad(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	o := v0Options{args: []string{"--state-dir", state}}

	e1 := newV0Editor(t, o)
	e1.Initialize(t)
	sid := e1.NewSession(t, cwd)
	if _, err := e1.Prompt(ctxT(t), sid, "hello"); err != nil {
		t.Fatal(err)
	}
	chunks := e1.Fake.Chunks(sid)
	stopBridge(t, e1.Bridge)

	e2 := newV0Editor(t, o)
	e2.Initialize(t)
	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	got := slices.DeleteFunc(replayBefore(t, e2.Editor, sid, id), func(s string) bool { return strings.HasPrefix(s, "agent_thought") })
	want := []string{"user:hello"}
	for _, c := range chunks {
		want = append(want, "agent:"+c)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed: got %q, want %q", got, want)
	}
	res, err := e2.Prompt(ctxT(t), sid, "again")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load: %+v %v", res, err)
	}
	js, err := fakev0.ReadJournals(e2.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	primed := false
	for _, j := range js {
		for _, line := range j.Received {
			primed = primed || strings.Contains(line, "sendUserMessage") && strings.Contains(line, "User: hello") && strings.Contains(line, "again")
		}
	}
	if !primed {
		t.Errorf("the new legacy agent session was not primed with the history")
	}
}

func TestSessions_KillDashNineMidStreamThenLoad(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}

	e1 := NewEditor(t, ChildTransport("acp"), args)
	e1.Initialize(t)
	sid := e1.NewSession(t, cwd)
	promptTurn(t, e1, sid, 3) // flushed and fsynced at its end
	_ = promptAsync(ctxT(t), e1, sid, "hold forever")
	waitChunk(t, e1.Out, "holding:forever")
	// Kill once the update is on its way to disk (the store hands records
	// to the OS within 10 ms, fsyncs within a second).
	transcript := filepath.Join(state, string(sid)+".ndjson")
	deadline := time.Now().Add(WaitTimeout)
	for {
		data, _ := os.ReadFile(transcript)
		if strings.Contains(string(data), "holding:forever") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the streamed update never reached the transcript; it holds:\n%s", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e1.Out.AllowCutLastLine()
	if err := killPID(e1.Pid()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e1.WaitExit(10 * time.Second); !ok {
		t.Fatal("the bridge survived kill -9")
	}
	// A crash in the middle of a write leaves a torn line.
	f, err := os.OpenFile(transcript, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"t":"update","at":"2026-01-01T00:00:00Z","body":{"sessionId":`)
	f.Close()

	e2 := NewEditor(t, ChildTransport("acp"), args)
	e2.Initialize(t)
	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if l := e2.Out.Response(t, id); !l.Get("result").IsObject() {
		t.Fatalf("session/load after kill -9 = %s", l)
	}
	got := replayBefore(t, e2, sid, id)
	// The turn the kill cut short ends with the gap record's message.
	want := append(streamed("stream 3", 3), "user:hold forever", "agent:holding:forever")
	if n := len(got); n != len(want)+1 || !slices.Equal(got[:n-1], want) || !strings.HasPrefix(got[n-1], "agent:[acp-bridge: this turn was interrupted") {
		t.Fatalf("replay after kill -9: got %q, want %q and the interrupted turn's gap", got, want)
	}
	promptWorks(t, e2, sid, 2)
}

func TestSessions_WSAgentRestartedSessionReattaches(t *testing.T) {
	t.Parallel()
	first := StartWSAgent(t, fakeagent.WSOptions{})
	e := NewEditor(t, urlTransport(first.URL), EditorOptions{Args: []string{"--state-dir", t.TempDir()}})
	e.Initialize(t)
	e.NewSession(t, "")
	sid := e.NewSession(t, "") // sess-2: its new backend session will be sess-1
	promptTurn(t, e, sid, 2)
	first.Close()
	// A prompt already on its way to a dying connection fails with it (it
	// may have reached the agent); the next one must work. Wait until the
	// bridge has seen the connection go.
	deadline := time.Now().Add(WaitTimeout)
	for !strings.Contains(e.Stderr(), "agent link lost") {
		if time.Now().After(deadline) {
			t.Fatal("the bridge did not notice the agent's connection closing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	second := StartWSAgent(t, fakeagent.WSOptions{Addr: first.Addr})
	promptTurn(t, e, sid, 3)
	if n := second.Dials(); n != 1 {
		t.Errorf("the restarted agent was dialed %d times, want 1", n)
	}
	if j := e.Journal(t); !journalHas(j, "session/prompt", "User: stream 2", "stream 3") {
		t.Errorf("the re-attached backend session did not get the history; frames %q", j.Frames)
	}
}

func TestSessions_IdleBackendClosedThenReattached(t *testing.T) {
	t.Parallel()
	e := newV0Editor(t, v0Options{args: []string{"--state-dir", t.TempDir(), "--session-idle", "300ms"}})
	e.Initialize(t)
	sid := e.NewSession(t, "")
	if _, err := e.Prompt(ctxT(t), sid, "hello"); err != nil {
		t.Fatal(err)
	}
	// The idle backend's process is stopped.
	deadline := time.Now().Add(WaitTimeout)
	for {
		js, _ := fakev0.ReadJournals(e.journalDir)
		closed := false
		for _, j := range js {
			closed = closed || slices.Contains(j.Events, "eof") && slices.ContainsFunc(j.Received, func(l string) bool { return strings.Contains(l, "hello") })
		}
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session's agent process was not closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := e.Prompt(ctxT(t), sid, "again")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after idle cleanup: %+v %v", res, err)
	}
	js, _ := fakev0.ReadJournals(e.journalDir)
	primed := false
	for _, j := range js {
		for _, line := range j.Received {
			primed = primed || strings.Contains(line, "User: hello") && strings.Contains(line, "again")
		}
	}
	if !primed {
		t.Errorf("the re-attached session's new agent did not get the history")
	}
}

// switchConfig writes a configuration with two agents: "a", the fake ACP
// agent, and "b", the fake legacy acp-v0 agent journaling into v0dir.
func switchConfig(t *testing.T, v0dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agents.hcl")
	cfg := fmt.Sprintf(`default_agent = "a"
agent "a" {
  command = [%q]
  env = { FAKE_AGENT = "acp" }
}
agent "b" {
  dialect = "acp-v0"
  command = [%q]
  env = { FAKE_AGENT = "acp-v0", %s = %q }
}
`, exe, exe, fakev0.EnvJournal, v0dir)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// v0Received reports whether any legacy agent connection received a line
// containing all of parts.
func v0Received(t *testing.T, dir string, parts ...string) bool {
	t.Helper()
	js, err := fakev0.ReadJournals(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		for _, line := range j.Received {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return true
			}
		}
	}
	return false
}

func TestSessions_SwitchAgentMidConversation(t *testing.T) {
	t.Parallel()
	state, cwd, v0dir := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := switchConfig(t, v0dir)
	tr := Transport{Name: "config", Start: func(*testing.T) Agent { return Agent{Args: []string{"--config", cfg}} }}
	args := EditorOptions{Args: []string{"--state-dir", state}}

	e := NewEditor(t, tr, args)
	e.Initialize(t)
	l := e.RawCall(t, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, cwd))
	sid := acp.SessionId(l.Get("result.sessionId").Str)
	opt := l.Get(`result.configOptions.#(id=="agent")`)
	if opt.Get("type").Str != "select" || opt.Get("currentValue").Str != "a" || opt.Get("options.#.value").Raw != `["a","b"]` {
		t.Fatalf("session/new = %s: want a select option \"agent\" on a, offering a and b", l)
	}
	promptTurn(t, e, sid, 2)

	// Refused while a turn runs.
	held := promptAsync(ctxT(t), e, sid, "hold k")
	waitChunk(t, e.Out, "holding:k")
	set := fmt.Sprintf(`{"sessionId":%q,"configId":"agent","value":"b"}`, sid)
	l = e.RawCall(t, "session/set_config_option", set)
	if code, isErr := l.ErrorCode(); !isErr || code == -32000 || code == -32002 || code == -32800 || !strings.Contains(l.Get("error.message").Str, "turn is running") {
		t.Fatalf("switch during a turn = %s, want a clear refusal", l)
	}
	e.RawCall(t, "_test/release", `{"key":"k"}`)
	await(t, held, "held prompt")

	id := e.RawSend(t, "session/set_config_option", set)
	l = e.Out.Response(t, id)
	if l.Get(`result.configOptions.#(id=="agent").currentValue`).Str != "b" {
		t.Fatalf("switch = %s, want currentValue b", l)
	}
	if _, ok := e.Out.Find(WaitTimeout, func(l Line) bool {
		return l.Method() == "session/update" && l.Get("params.update.sessionUpdate").Str == "config_option_update" &&
			l.Get(`params.update.configOptions.#(id=="agent").currentValue`).Str == "b"
	}); !ok {
		t.Fatal("no config_option_update naming agent b")
	}
	res, err := e.Prompt(ctxT(t), sid, "hello")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after the switch: %+v %v", res, err)
	}
	if !v0Received(t, v0dir, "sendUserMessage", "User: stream 2", "chunk-0001", "hello") {
		t.Fatalf("agent b did not receive the migrated history with the prompt")
	}
	if j := e.Journal(t); journalHas(j, "session/prompt", `"hello"`) {
		t.Errorf("agent a still received the prompt after the switch")
	}
	stopBridge(t, e.Bridge)

	// Load after a restart restores agent b.
	e2 := NewEditor(t, tr, args)
	e2.Initialize(t)
	id = e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	l = e2.Out.Response(t, id)
	if l.Get(`result.configOptions.#(id=="agent").currentValue`).Str != "b" {
		t.Fatalf("load after restart = %s, want agent b", l)
	}
	if res, err := e2.Prompt(ctxT(t), sid, "again"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load: %+v %v", res, err)
	}
	if !v0Received(t, v0dir, "sendUserMessage", "again") {
		t.Fatalf("the prompt after load did not reach agent b")
	}
}

// A relayed ACP agent serves every session on one process: once the only
// session on it is idle, the process goes, and the next prompt brings a new
// one with the session re-attached.
func TestSessions_IdleSharedAgentClosedThenReattached(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: []string{"--state-dir", t.TempDir(), "--session-idle", "300ms"}})
	sid := e.Start(t)
	promptTurn(t, e, sid, 2)
	pid := agentInfoPID(t, e)
	deadline := time.Now().Add(WaitTimeout)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle session's agent (pid %d) was not stopped", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	promptWorks(t, e, sid, 3)
	if j := e.Journal(t); !journalHas(j, "session/prompt", "User: stream 2", "stream 3") {
		t.Errorf("the new agent process did not get the history; frames %q", j.Frames)
	}
	if agentInfoPID(t, e) == pid {
		t.Errorf("the prompt was served by the stopped agent")
	}
}

// Claude Code keeps its sessions: load replays the bridge's transcript and
// re-attaches with the CLI's own --resume, without a preamble.
func TestSessions_ClaudeLoadReplaysThenResumesNatively(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	first := newClaudeEditor(t, t.TempDir(), "--state-dir", state)
	first.Initialize(t)
	sid := first.NewSession(t, cwd)
	if r, err := first.Prompt(ctxT(t), sid, "whoami"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	seen := first.Fake.Chunks(sid)
	stopBridge(t, first.Bridge)

	e := newClaudeEditor(t, t.TempDir(), "--state-dir", state)
	e.Initialize(t)
	id := e.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if l := e.Out.Response(t, id); !l.Get("result").IsObject() {
		t.Fatalf("session/load = %s", l)
	}
	got := slices.DeleteFunc(replayBefore(t, e.Editor, sid, id), func(s string) bool { return !strings.HasPrefix(s, "user:") && !strings.HasPrefix(s, "agent:") })
	want := []string{"user:whoami"}
	for _, c := range seen {
		want = append(want, "agent:"+c)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	if r, err := e.Prompt(ctxT(t), sid, "whoami"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load = %+v, %v", r, err)
	}
	uuid := claude.SessionUUID(string(sid))
	if c := e.Fake.Chunks(sid); c[len(c)-1] != "session "+uuid+" resumed true" {
		t.Errorf("chunks end %q, want the CLI resumed", c[len(c)-1])
	}
	j := e.journalIn(t, cwd, "the prompt", func(j fakeclaude.Journal) bool { return len(j.UserMessages()) == 1 })
	if want := wantArgv("--resume", uuid); !slices.Equal(j.Argv, want) {
		t.Errorf("CLI argv = %q\nwant %q", j.Argv, want)
	}
	if m := j.UserMessages()[0]; strings.Contains(m, "[acp-bridge]") {
		t.Errorf("a natively resumed session got a history preamble: %s", m)
	}
}

// A session whose agent cannot be started again is not reported loaded: the
// load fails saying why, and the session stays listed for a later try.
func TestSessions_LoadFailsWhenTheAgentCannotReattach(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	first := newClaudeEditor(t, t.TempDir(), "--state-dir", state)
	first.Initialize(t)
	sid := first.NewSession(t, cwd)
	if r, err := first.Prompt(ctxT(t), sid, "whoami"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	stopBridge(t, first.Bridge)

	// The same session, now behind a "CLI" that exits at once.
	broken := Transport{Name: "child", Start: func(*testing.T) Agent {
		return Agent{Args: []string{"--dialect", "claude-stream-json", "--", "/bin/false"}}
	}}
	// Another command is another agent by name, whose sessions session/list
	// leaves out unless asked for all.
	e := NewEditor(t, broken, EditorOptions{Args: []string{"--state-dir", state, "--list-all-sessions"}})
	e.Initialize(t)
	for _, method := range []string{"session/load", "session/resume"} {
		l := e.RawCall(t, method, fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
		code, isErr := l.ErrorCode()
		if !isErr || code != -32603 || !strings.Contains(l.Get("error.message").Str, string(sid)) {
			t.Fatalf("%s over an agent that cannot start = %s, want an error naming the session", method, l)
		}
		t.Logf("%s: %s", method, l.Get("error.message").Str)
	}
	if l := e.RawCall(t, "session/list", ""); l.Get("result.sessions.0.sessionId").Str != string(sid) {
		t.Fatalf("session/list after the failed load = %s, want the session still listed", l)
	}
}

// Every rule profile (custom WebSocket and stdio dialects, none with a
// session/load of its own) gets list, load and a primed re-attach.
func TestSessions_RuleProfilesLoadAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, p := range rulesProfiles {
		t.Run(p.dialect, func(t *testing.T) {
			t.Parallel()
			state, cwd := t.TempDir(), t.TempDir()
			// A fake WebSocket agent comes back on another port, which
			// names another agent: list them all.
			o := EditorOptions{Args: append([]string{"--dialect", p.dialect, "--state-dir", state, "--list-all-sessions"}, p.args...)}
			e1 := NewEditor(t, p.transports[0], o)
			e1.Initialize(t)
			sid := e1.NewSession(t, cwd)
			if r, err := e1.Prompt(ctxT(t), sid, "hello there"); err != nil || r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt = %+v, %v", r, err)
			}
			var want []string
			for _, c := range e1.Fake.Chunks(sid) {
				want = append(want, "agent:"+c)
			}
			stopBridge(t, e1.Bridge)

			e2 := NewEditor(t, p.transports[0], o)
			e2.Initialize(t)
			if l := e2.RawCall(t, "session/list", fmt.Sprintf(`{"cwd":%q}`, cwd)); l.Get("result.sessions.0.title").Str != "hello there" {
				t.Fatalf("session/list = %s", l)
			}
			id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
			if l := e2.Out.Response(t, id); !l.Get("result").IsObject() {
				t.Fatalf("session/load = %s", l)
			}
			got := replayBefore(t, e2, sid, id)
			if len(got) == 0 || got[0] != "user:hello there" {
				t.Fatalf("replay %q does not start with the prompt", got)
			}
			agent := slices.DeleteFunc(got[1:], func(s string) bool { return !strings.HasPrefix(s, "agent:") })
			if !slices.Equal(agent, want) {
				t.Fatalf("replayed agent messages %q, want %q", agent, want)
			}
			if r, err := e2.Prompt(ctxT(t), sid, "hello there"); err != nil || r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt after load = %+v, %v", r, err)
			}
		})
	}
}

// One turn at a time holds for a loaded session too, whose prompts go to a
// backend session of another id: a second prompt while the first runs is
// refused with a clear error, and the session works once the turn ends.
func TestSessions_OneTurnOnALoadedSession(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}

	e1 := NewEditor(t, ChildTransport("acp"), args)
	e1.Initialize(t)
	e1.NewSession(t, cwd)
	// The second session: loaded into a fresh agent, its backend session
	// gets the agent's first id, so the bridge maps ids both ways.
	sid := e1.NewSession(t, cwd)
	promptTurn(t, e1, sid, 1)
	stopBridge(t, e1.Bridge)

	e2 := NewEditor(t, ChildTransport("acp"), args)
	e2.Initialize(t)
	id := e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	if l := e2.Out.Response(t, id); !l.Get("result").IsObject() {
		t.Fatalf("session/load = %s, want a result", l)
	}
	held := promptAsync(ctxT(t), e2, sid, "hold k")
	waitChunk(t, e2.Out, "holding:k")
	l := e2.RawCall(t, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"hello"}]}`, sid))
	if code, isErr := l.ErrorCode(); !isErr || code == -32000 || code == -32002 || code == -32800 || !strings.Contains(l.Get("error.message").Str, "already has a prompt running") {
		t.Fatalf("second prompt on a loaded session during a turn = %s, want the one-turn refusal", l)
	}
	e2.RawCall(t, "_test/release", `{"key":"k"}`)
	await(t, held, "held prompt")
	promptTurn(t, e2, sid, 2)
}
